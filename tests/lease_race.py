"""Two trainers and two eval jobs racing for one fresh bucket model_dir (issue 71): how often
more than one wins.

Two worker processes, on host names trainer-a and trainer-b (each in its own UTS namespace
where `unshare --uts` is allowed, as root), each try at the same instant, for every trial's
model_dir at once (a thread each), to take the training lease and to claim step 100 of eval
name 'val'. Each reaches the store through its own proxy (tests/store_faults.py): trainer-a's
adds 0.2 s to every request, so both read before either writes; trainer-b's holds each of its
writes back 8 s, past trainer-a's 2 s settle window (common/lease.py's SETTLE_SECS), as a
partitioned node's or a long retry's would land. A worker reports what it won, then holds it
until both have reported.

    python -m tests.lease_race [--stores=s3,gcs] [--trials=20] [--code=FOLDER]

--code: the service's code to race (a checkout of another commit: what main did before).
"""
import argparse
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HOSTS = ('trainer-a', 'trainer-b')
# trainer-b's writes: land after trainer-a's read-back (a few 0.2 s requests, then 2 s)
WRITE_HOLD_SECS = 8.0
LATENCY_SECS = 0.2  # trainer-a's requests: trainer-b reads before trainer-a's write lands
THIS_FILE = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(THIS_FILE))


def worker(roots: str, trials: int) -> None:
    """In a racer: 'ready', then at the time read from stdin every trial's lease and claim on
    each of roots (comma-separated) at once; prints [{'lease': [won?...], 'claim': [...]} a
    root] and holds them until stdin closes."""
    from common.errors import UserError
    from trainer.evaluation.claims import Claims
    from trainer.model_dir import train_lock
    from trainer.model_dir.ledger import Ledger

    roots = roots.split(',')
    won = [{'lease': [None] * trials, 'claim': [None] * trials} for _ in roots]
    held = []

    def lease(r, i):
        taking = train_lock.Lease(f'{roots[r]}/trial-{i}')
        try:
            taking.acquire()
            held.append(taking)
            won[r]['lease'][i] = True
        except UserError:
            won[r]['lease'][i] = False

    def claim(r, i):
        got = Claims(Ledger(f'{roots[r]}/trial-{i}', 'val'), 'data/validation-*').try_claim(100)
        held.append(got)
        won[r]['claim'][i] = got is not None

    for root in roots:
        train_lock.Lease(f'{root}/warm-up').read()  # the store's client made before the race
    print('ready', flush=True)
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.time()))
    threads = [threading.Thread(target=call, args=(r, i)) for r in range(len(roots))
               for i in range(trials) for call in (lease, claim)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(won), flush=True)
    sys.stdin.read()  # held until the other racer has reported too
    os._exit(0)  # nothing released: the other racer's late writes meet the objects as held


def _on_host(host: str):
    """The command prefix that runs a command on host (its own UTS namespace), or [] where
    unshare --uts is not allowed."""
    unshare = shutil.which('unshare')
    if unshare and subprocess.run([unshare, '--uts', 'true'], capture_output=True).returncode == 0:
        return [unshare, '--uts', 'sh', '-c', 'hostname "$0" && exec "$@"', host]
    return []


@contextlib.contextmanager
def _routes(servers, folder: str):
    """Each racer's environment: its own proxy in front of each store (module docstring)."""
    from tests.store_faults import FaultMix, FaultProxy
    held_back = FaultMix('writes held back', {'stall': 1.0}, kinds=('PUT', 'MULTIPART'),
                         stall_secs=(WRITE_HOLD_SECS, WRITE_HOLD_SECS))
    options = [{'latency_secs': LATENCY_SECS}, {'mix': held_back}]
    with contextlib.ExitStack() as stack:
        envs = [{}, {}]
        for (host, option), env in zip(zip(HOSTS, options), envs):
            if 's3' in servers:
                proxy = stack.enter_context(FaultProxy(servers['s3'].env['S3_ENDPOINT'],
                                                       **option))
                env['S3_ENDPOINT'] = proxy.url
            if 'gcs' in servers:
                from tests.gcs_server import ProxyProcess, gcs_env, stop_server
                server = servers['gcs']
                proxy = stack.enter_context(FaultProxy(f'http://127.0.0.1:{server.port}',
                                                       store='gcs', **option))
                os.makedirs(os.path.join(folder, host), exist_ok=True)
                tls = ProxyProcess(os.path.join(folder, host), ('127.0.0.1', proxy.port),
                                   server.certificates)
                stack.callback(stop_server, tls.process, {})
                env.update(gcs_env(tls.url, server.ca))
        yield envs


def race(servers, folder: str, trials: int, code: str = REPO):
    """Runs the race once on a fresh bucket of each server ({'s3': ..., 'gcs': ...}), both at
    once: per store and kind ('lease', 'claim'), trials by how many racers won
    {winners: trials}."""
    stores = sorted(servers)
    roots = [('s3://' if store == 's3' else 'gs://') + servers[store].make_bucket('race')
             for store in stores]
    with _routes(servers, folder) as envs:
        racers = []
        for host, env in zip(HOSTS, envs):
            log = open(os.path.join(folder, f'{host}.log'), 'w')
            racers.append(subprocess.Popen(
                [*_on_host(host), sys.executable, THIS_FILE, '--worker', ','.join(roots),
                 str(trials)],
                cwd=code, env=dict(os.environ, **env, PYTHONPATH=code), text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log))
            log.close()
        try:
            for racer, host in zip(racers, HOSTS):
                if racer.stdout.readline().strip() != 'ready':
                    raise AssertionError(f'{host} did not start:\n' + _tail(folder, host))
            start = time.time() + 0.5
            for racer in racers:
                racer.stdin.write(f'{start}\n')
                racer.stdin.flush()
            results = []
            for racer, host in zip(racers, HOSTS):
                line = racer.stdout.readline()
                if not line:
                    raise AssertionError(f'{host} reported nothing:\n' + _tail(folder, host))
                results.append(json.loads(line))
                with open(os.path.join(folder, f'{host}.log'), 'a') as log:
                    log.write(f'won: {line}')
        finally:
            for racer in racers:
                with contextlib.suppress(OSError):
                    racer.stdin.close()
                racer.wait(timeout=60)
    return {store: {kind: dict(collections.Counter(sum(result[r][kind][i] for result in results)
                                                   for i in range(trials)))
                    for kind in ('lease', 'claim')}
            for r, store in enumerate(stores)}


def _tail(folder, host):
    with open(os.path.join(folder, f'{host}.log')) as log:
        return log.read()[-3000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--stores', default='s3,gcs', help='s3, gcs or both')
    parser.add_argument('--trials', type=int, default=20)
    parser.add_argument('--code', default=REPO, help='the service code to race')
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix='lease-race-')
    from tests import gcs_server, s3_server
    with contextlib.ExitStack() as stack:
        servers = {}
        if 's3' in args.stores.split(','):
            servers['s3'] = stack.enter_context(
                s3_server.running_server(os.path.join(folder, 'moto.log')))
        if 'gcs' in args.stores.split(','):
            servers['gcs'] = stack.enter_context(gcs_server.running_server(folder))
        counts = race(servers, folder, args.trials, os.path.abspath(args.code))
    print(json.dumps({'trials': args.trials, 'code': args.code, 'logs': folder,
                      'trials by winners': counts}))


if __name__ == '__main__':
    if sys.argv[1:2] == ['--worker']:
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
