"""Whole-file writes that readers never see half done: a temporary name, then a rename."""
import json
import os


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Writes to a temporary name, then renames: readers never see half a file."""
    temp_path = f'{path}.tmp-{os.getpid()}'
    with open(temp_path, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp_path, path)


def write_text_atomic(path: str, text: str) -> None:
    write_bytes_atomic(path, text.encode('utf-8'))


def write_json_atomic(path: str, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + '\n')


def pid_alive(pid: int) -> bool:
    """Whether the process that owns a temporary (NAME.tmp-PID, .staging-PID) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True
