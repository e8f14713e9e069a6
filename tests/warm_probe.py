"""A command for test_warm_start: prints what it sees as JSON, a line on stderr, then exits with
the status its argument gives (or sleeps, or raises)."""
import json
import os
import sys
import time


def probe():
    print(json.dumps({'pid': os.getpid(), 'ppid': os.getppid(), 'argv': sys.argv, 'cwd': os.getcwd(),
                      'name': __name__, 'path0': sys.path[0],
                      'marker': os.environ.get('WARM_START_MARKER'),
                      'tensorflow_imported': 'tensorflow' in sys.modules}), flush=True)
    print('on stderr', file=sys.stderr)
    action = sys.argv[1]
    if action == 'sleep':
        time.sleep(120)
    if action == 'raise':
        raise ValueError('the probe failed')
    if action == 'interrupt':
        raise KeyboardInterrupt
    sys.exit(int(action))


if __name__ == '__main__':
    probe()
