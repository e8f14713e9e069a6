"""What the tests share that is not a fixture: tiny data made here, running commands as a user
does, and checking their one-line errors. The fixtures are in conftest.py."""
import gzip
import os
import re
import signal
import struct
import subprocess
import sys
import time
import types

import numpy as np

from tests import warm_start

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Commands that import TensorFlow whatever their flags: run_module forks them warm.
WARM_MODULES = ('trainer.main', 'input_fns.prepare', 'trainer.observe.status', 'benchmarks.input_bench',
                'trainer.deploy')


def make_digit_arrays(count, seed=0):
    """Random 28x28 uint8 images whose label is drawn into them (a bright bar), so models can learn."""
    rng = np.random.RandomState(seed)
    labels = (np.arange(count) % 10).astype(np.uint8)
    images = rng.randint(0, 60, size=(count, 28, 28)).astype(np.uint8)
    for image, label in zip(images, labels):
        image[2 + 2 * label:4 + 2 * label, 4:24] = 255
    return images, labels


def cmyk_jpeg(size=16):
    """A baseline JPEG with four (CMYK, Adobe) components, every block flat mid-grey, written
    out by hand: TensorFlow encodes no CMYK. decode_jpeg reads it as RGB but not as grayscale."""
    def segment(marker, payload):
        return bytes([0xFF, marker]) + struct.pack('>H', len(payload) + 2) + payload
    one_code = bytes([1] + [0] * 15) + b'\x00'  # a Huffman table: one 1-bit code, for symbol 0
    components = range(1, 5)
    return b''.join([
        b'\xff\xd8',
        segment(0xEE, b'Adobe' + struct.pack('>HHHB', 100, 0, 0, 0)),  # transform 0: CMYK
        segment(0xDB, b'\x00' + bytes([1] * 64)),
        segment(0xC0, struct.pack('>BHHB', 8, size, size, 4)
                + b''.join(bytes([c, 0x11, 0]) for c in components)),
        segment(0xC4, b'\x00' + one_code), segment(0xC4, b'\x10' + one_code),
        segment(0xDA, bytes([4]) + b''.join(bytes([c, 0x00]) for c in components) + b'\x00\x3f\x00'),
        bytes((size // 8) ** 2),  # each block: DC difference 0 ('0'), end of block ('0')
        b'\xff\xd9'])


def write_idx(path, array, magic):
    header = magic.to_bytes(4, 'big') + b''.join(d.to_bytes(4, 'big') for d in array.shape)
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'wb') as f:
        f.write(header + array.astype(np.uint8).tobytes())


def run_prepare(prepare_fn, **overrides):
    """Calls an input_fns.prepare* function with the prepare flags' defaults, except overrides."""
    from input_fns.prepare import command as prepare_module
    values = dict(source_dir=None, output_dir=None, num_shards=4, num_eval_shards=2,
                  validation_size=0, validation_fraction=0.2, calibration_fraction=0.0, seed=0,
                  train_people_file=None,
                  num_pairs=300, pairs_file=None, split=None, schema_from=None, strict=False,
                  pair_folds=1, image_size='64x64', channels='3', resize='pad', stored_as='pixels',
                  rows_per_shard=100, num_features=1024, delimiter=None, decimal=None,
                  ignore_columns=None, date_format=None, thousands=None, encoding=None, sheet=None,
                  labels_file=None, label=None, float_overflow=None)
    values.update(overrides)
    return prepare_module.call_with_flags(prepare_fn, types.SimpleNamespace(**values))


def synthetic_face_shards(work, num_people, num_pairs):
    """Synthetic people in LFW's layout under WORK/lfw, prepared into WORK/data with validation
    and calibration pairs; returns (root, data)."""
    from input_fns.faces import prepare_faces, synthetic_faces
    root, data = str(work / 'lfw'), str(work / 'data')
    synthetic_faces.write_faces(root, num_people=num_people, size=64, seed=5)
    run_prepare(prepare_faces.prepare_faces, source_dir=root, output_dir=data,
                validation_fraction=0.3, num_pairs=num_pairs, calibration_fraction=0.25)
    return root, data


def trainer_flags(*args):
    """absl's FLAGS with the trainer's flags parsed from args (defined in this process once)."""
    from absl import flags

    from trainer.config import flags as trainer_flags_module
    if 'model_dir' not in flags.FLAGS:
        trainer_flags_module.define_flags()
    flags.FLAGS.unparse_flags()
    flags.FLAGS(['trainer.main', *args])
    return flags.FLAGS


def path_on(store, request, tmp_path, name='model'):
    """tmp_path/NAME on a local disk, or NAME in a fresh bucket on the S3 ('s3') or GCS ('gcs')
    test server."""
    if store == 'local':
        return str(tmp_path / name)
    return request.getfixturevalue(f'{store}_bucket') + '/' + name


def run_module(module, *args, check=True, timeout=300):
    """Runs `python -m module args` from the repo root, as a user would; returns the CompletedProcess.

    The commands that import TensorFlow anyway are forked from an interpreter that has imported
    it already (warm_start), a process each all the same."""
    if module in WARM_MODULES:
        result = warm_start.run(module, args, timeout)
    else:
        result = subprocess.run([sys.executable, '-m', module, *args], cwd=REPO, capture_output=True,
                                text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f'{module} {args} exited {result.returncode}:\n{result.stderr[-3000:]}')
    return result


def default_sigint():
    """For a child: Ctrl-C (SIGINT) raises KeyboardInterrupt again, even when the tests run as a
    shell's background job, which ignores SIGINT and passes that on to its children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_module(module, *args, log_path):
    """Starts `python -m module args` in the background, its output (stdout and stderr) to log_path;
    forked warm as run_module's are, where it may be."""
    if module in WARM_MODULES and warm_start.runs_warm():
        return warm_start.start(module, args, log_path)
    with open(log_path, 'w') as log:
        return subprocess.Popen([sys.executable, '-m', module, *args], cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint)


def wait_for_log(log_path, pattern, process, timeout=120):
    """Waits for a line matching the regex in log_path; fails if the process ends first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(log_path) as f:
            match = re.search(pattern, f.read(), re.MULTILINE)
        if match:
            return match
        if process.poll() is not None:
            raise AssertionError(f'exited {process.returncode} before logging {pattern!r}:\n'
                                 + open(log_path).read()[-3000:])
        time.sleep(0.02)
    raise AssertionError(f'no {pattern!r} in {log_path} after {timeout}s')


def wait_until(condition, timeout=60):
    """Polls `condition` until it holds: a test waits for what happened, not for a time a
    loaded machine may not keep."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f'timed out after {timeout} s'
        time.sleep(0.05)


def run_together(log_dir, jobs, timeout=240):
    """Runs `python -m trainer.main ARGS` for each {name: ARGS} at once; returns their logs by name."""
    return finish({name: (start_module('trainer.main', *args, log_path=log_dir / f'{name}.log'),
                          log_dir / f'{name}.log') for name, args in jobs.items()}, timeout)


def finish(jobs, timeout=240):
    """Waits for background jobs {name: (process, log_path)}; returns their logs by name.

    Fails, and kills the others, as soon as one exits non-zero or time runs out.
    """
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            codes = {name: process.poll() for name, (process, _) in jobs.items()}
            failed = [name for name, code in codes.items() if code not in (None, 0)]
            if failed:
                name = failed[0]
                raise AssertionError(f'{name} exited {codes[name]}:\n'
                                     + open(jobs[name][1]).read()[-3000:])
            if all(code == 0 for code in codes.values()):
                return {name: open(log_path).read() for name, (_, log_path) in jobs.items()}
            time.sleep(0.2)
        raise AssertionError(f'still running after {timeout}s: '
                             + ', '.join(name for name, code in codes.items() if code is None))
    finally:
        for process, _ in jobs.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def run_with_env(module, *args, env=None, timeout=300, **popen_kwargs):
    """run_module with extra environment variables (TF_CONFIG...) or Popen options; never checks."""
    return subprocess.run([sys.executable, '-m', module, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **(env or {})),
                          **popen_kwargs)


def assert_one_line_error(result, status, *fragments):
    """Exit `status`, no traceback, and a last stderr line 'error: ...' holding every fragment."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == status, f'exited {result.returncode}:\n{result.stderr[-3000:]}'
    assert 'Traceback' not in result.stderr, result.stderr[-3000:]
    assert lines and lines[-1].startswith('error: '), result.stderr[-3000:]
    return assert_fragments(lines[-1], *fragments)


def assert_fragments(line, *fragments):
    """line, which holds every fragment."""
    for fragment in fragments:
        assert str(fragment) in line, f'{fragment!r} not in {line!r}'
    return line


def trainer_user_error(*args):
    """The line `python -m trainer.main ARGS` would exit 2 with ('error: ...'), for an error
    found before TensorFlow builds a graph: raised here, in the test's own process, where a
    command would cost a process and the import of our modules. Each command keeps a
    subprocess test per exit status (assert_one_line_error), which checks the printing."""
    import pytest
    from absl import flags

    from common.errors import UserError
    from trainer import main
    trainer_flags(*(arg for arg in args if arg.startswith('--')))
    try:
        with pytest.raises(UserError) as error:
            main.main(['trainer.main', *(arg for arg in args if not arg.startswith('--'))])
    finally:
        flags.FLAGS.unparse_flags()
    line = f'error: {error.value}'
    assert '\n' not in line, line
    return line


def copy_model_dir(model_dir, destination):
    import shutil
    shutil.copytree(model_dir, destination)
    return str(destination)


def evaluated(step, checkpoint=None, **metrics):
    """The ledger entry of an evaluated step, as an eval job writes it."""
    from trainer.model_dir import ledger
    return ledger.LedgerEntry(step=step, checkpoint=checkpoint or f'model.ckpt-{step}',
                              status=ledger.EVALUATED, time='2026-11-26T10:00:00+0000',
                              eval_files='data/validation-*', metrics=metrics)


def skipped(step):
    """The ledger entry of a step whose checkpoint was deleted before it was evaluated."""
    from trainer.model_dir import ledger
    return ledger.LedgerEntry(step=step, checkpoint=f'model.ckpt-{step}', status=ledger.SKIPPED,
                              time='2026-11-26T10:00:00+0000', eval_files='data/validation-*',
                              reason='deleted before evaluation')


def write_fake_checkpoints(model_dir, steps, newest_saved):
    """Empty checkpoints of steps in the folder model_dir (a pathlib.Path), the state file naming
    newest_saved as the last one saved."""
    model_dir.mkdir(exist_ok=True)
    for step in steps:
        (model_dir / f'model.ckpt-{step}.index').write_text('')
    (model_dir / 'checkpoint').write_text(f'model_checkpoint_path: "model.ckpt-{newest_saved}"\n')


def csv_as_workbook(text: str, path, sheet: str = 'Sheet1', notes_first: bool = False) -> str:
    """The CSV text as an Excel workbook of typed cells, as Excel would hold it: whole numbers as
    ints, other numbers as floats, empty fields as empty cells, the rest as text; notes_first: in
    its second sheet, after a sheet 'Notes' of a line of text."""
    import csv
    import io
    import openpyxl

    def typed(field):
        for kind in (int, float):
            try:
                return kind(field)
            except ValueError:
                pass
        return field or None
    book = openpyxl.Workbook()
    rows = book.active
    if notes_first:
        rows.title = 'Notes'
        rows.append(['Exported from the shop, see the second sheet'])
        rows = book.create_sheet()
    rows.title = sheet
    for fields in csv.reader(io.StringIO(text)):
        rows.append([typed(field) for field in fields])
    book.save(str(path))
    return str(path)
