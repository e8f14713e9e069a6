"""common.files and common.paths on ram:// (TF's in-memory filesystem), a local disk, a real S3
server and a GCS one (fake-gcs-server through TF's own gs://)."""
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest

from common import atomic_writes, file_trees, files, paths
from common.errors import UserError
from tests.s3_server import free_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=['ram', 'local', 's3', 'gcs'])
def root(request, tmp_path):
    if request.param == 'ram':
        return f'ram://files-{uuid.uuid4().hex[:8]}'
    if request.param == 'local':
        return str(tmp_path / 'root')
    return request.getfixturevalue(f'{request.param}_bucket') + '/root'


def test_whole_files_round_trip(root):
    files.makedirs(root)
    atomic_writes.write_json_atomic(paths.join(root, 'a', 'x.json'), {'step': 12})
    atomic_writes.write_text_atomic(paths.join(root, 'b.txt'), 'first')
    atomic_writes.write_text_atomic(paths.join(root, 'b.txt'), 'second')  # replaced whole
    assert files.read_json(paths.join(root, 'a', 'x.json')) == {'step': 12}
    assert files.read_text(paths.join(root, 'b.txt')) == 'second'
    assert files.exists(paths.join(root, 'b.txt'))
    assert not files.exists(paths.join(root, 'missing.txt'))
    assert files.listdir(root) == ['a', 'b.txt']  # no temporary names left behind
    assert files.listdir(paths.join(root, 'nothing-here')) == []


def test_a_folder_named_with_brackets_is_globbed_as_named(root):
    """'[1]' is a set of characters to a glob; where it matches nothing, it is the name."""
    named = [paths.join(root, 'runs[1]', 'train-0'), paths.join(root, 'Photos [2024]', 'a.csv')]
    for path in named:
        atomic_writes.write_text_atomic(path, 'x')
    assert files.glob(paths.join(root, 'runs[1]', 'train-*')) == named[:1]
    assert files.glob(named[1]) == named[1:]
    atomic_writes.write_text_atomic(paths.join(root, 'runs1', 'train-0'), 'x')
    assert files.glob(paths.join(root, 'runs[1]', 'train-*')) == [  # a glob's meaning first
        paths.join(root, 'runs1', 'train-0')]


def test_glob_copy_and_remove_tree(root):
    source, copy = paths.join(root, 'staged'), paths.join(root, 'copy')
    for name in ('model.ckpt-10.index', 'model.ckpt-20.index', 'model.ckpt-20.data-00000-of-00001',
                 'variables/variables.index'):
        atomic_writes.write_text_atomic(paths.join(source, name), name)
    assert [os.path.basename(p) for p in files.glob(paths.join(source, 'model.ckpt-*.index'))] == [
        'model.ckpt-10.index', 'model.ckpt-20.index']
    assert file_trees.copy_tree(source, copy) == sorted([
        'model.ckpt-10.index', 'model.ckpt-20.data-00000-of-00001', 'model.ckpt-20.index',
        'variables/variables.index'])
    assert files.read_text(paths.join(copy, 'variables', 'variables.index')) == \
        'variables/variables.index'
    file_trees.remove_tree(source)
    file_trees.remove_tree(source)  # already gone: fine
    assert files.glob(paths.join(source, '*')) == []
    assert files.isdir(copy)
    files.remove(paths.join(copy, 'model.ckpt-10.index'))
    files.remove(paths.join(copy, 'model.ckpt-10.index'))
    assert 'model.ckpt-10.index' not in files.listdir(copy)


@pytest.mark.parametrize('store', ['s3', 'gcs'])
def test_a_folder_in_a_bucket_is_its_objects_alone(store, request):
    bucket = request.getfixturevalue(f'{store}_bucket')
    files.makedirs(f'{bucket}/made/empty')  # no marker object ('made/') on either store
    assert files.listdir(bucket) == [] and not files.isdir(f'{bucket}/made')
    atomic_writes.write_text_atomic(f'{bucket}/made/deep/x.txt', 'x')
    file_trees.copy_tree(f'{bucket}/made', f'{bucket}/copy')
    assert files.listdir(bucket) == files.listdir(bucket + '/') == ['copy', 'made']  # the root too
    assert files.listdir(f'{bucket}/copy') == ['deep']
    file_trees.remove_tree(f'{bucket}/copy')
    assert files.listdir(bucket) == ['made']


def test_join_keeps_urls():
    assert paths.join('s3://b/m', 'eval_x', 'results') == 's3://b/m/eval_x/results'
    assert paths.bucket_of('gs://bucket/a/b') == 'gs://bucket'
    assert paths.is_local('runs/x') and paths.is_local('file:///tmp/x')
    assert not paths.is_local('ram://x') and paths.is_bucket('s3://b/x')


@pytest.mark.parametrize('store, scheme', [('s3', 's3'), ('gcs', 'gs')])
def test_missing_bucket_is_one_user_error(store, scheme, request):
    request.getfixturevalue(f'{store}_server')
    started = time.time()
    with pytest.raises(UserError, match=rf'^{scheme}://no-such-bucket/data/train-\*: bucket '
                                              rf'{scheme}://no-such-bucket does not exist'):
        files.glob(f'{scheme}://no-such-bucket/data/train-*')
    assert time.time() - started < 10
    with pytest.raises(UserError, match='does not exist'):  # remembered, still an error
        files.exists(f'{scheme}://no-such-bucket/x')


def run_python(code, env):
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def first_use_of(path, env):
    """Runs files.exists(path) in a fresh process; returns (its one line of output, seconds taken)."""
    result = run_python(f"""
        import time
        from common import atomic_writes, cli, files
        from common.errors import UserError
        started = time.time()
        try:
            files.exists({path!r})
            message = 'no error'
        except UserError as e:
            message = str(e)
        print(round(time.time() - started, 1), message)
        cli.exit_process(0)
        """, env)
    seconds, message = result.stdout.rstrip('\n').split(' ', 1)
    return message, float(seconds)


def unreachable_env(port):
    return dict(os.environ, S3_ENDPOINT=f'http://127.0.0.1:{port}', AWS_ACCESS_KEY_ID='x',
                AWS_SECRET_ACCESS_KEY='x', AWS_REGION='us-east-1', AWS_EC2_METADATA_DISABLED='true')


def test_unreachable_endpoint_fails_fast_and_names_the_path():
    message, seconds = first_use_of('s3://bucket/model', unreachable_env(free_port()))
    assert message.startswith('s3://bucket/model: cannot reach the S3 endpoint http://127.0.0.1:')
    assert '\n' not in message and seconds < 30


def test_wrong_credentials_are_one_user_error(tmp_path):
    from tests.s3_server import running_server
    with running_server(tmp_path / 'moto.log', set_environ=False,
                        checks_credentials_after=1) as server:
        bucket = server.make_bucket()  # the one request accepted without credentials
        env = dict(os.environ, **server.env)
        message, seconds = first_use_of(f's3://{bucket}/model', env)
    assert message.startswith(f's3://{bucket}/model: bucket s3://{bucket} does not exist or '
                              'these credentials cannot read it')
    assert seconds < 30


def test_hung_endpoint_gives_up_within_the_probe_timeout():
    """A server that accepts connections and never answers (tensorflow-io retries for ~50 s and
    then reports the bucket as empty)."""
    import socket
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen(16)
        message, seconds = first_use_of('s3://bucket/model/checkpoint',
                                        unreachable_env(listener.getsockname()[1]))
    assert message.startswith('s3://bucket/model/checkpoint: cannot reach the S3 endpoint')
    assert seconds < 30


@pytest.mark.parametrize('fail', [False, True])
def test_cli_exit_status_survives_tensorflow_io_teardown(s3_bucket, fail):
    """tensorflow-io 0.36.0 aborts (status 134) at interpreter exit after s3:// was used."""
    result = run_python(f"""
        from absl import app
        from common import atomic_writes, cli, files

        def main(argv):
            atomic_writes.write_text_atomic('{s3_bucket}/hello.txt', 'hi')
            print('wrote', files.read_text('{s3_bucket}/hello.txt'))
            return 2 if {fail} else 0

        app.run(cli.cli_main(main))
        """, os.environ)
    assert result.stdout == 'wrote hi\n'
    assert result.returncode == (2 if fail else 0), result.stderr[-2000:]


def test_a_flag_error_after_reading_a_bucket_model_dir_is_exit_2(s3_bucket):
    """The trainer reads --model_dir's flags.txt before it parses the other flags: its one-line
    error must exit 2 past that teardown too (it exited 134 in a TFJob: retried, not failed)."""
    result = subprocess.run([sys.executable, '-m', 'trainer.main', '--mode=train',
                             f'--model_dir={s3_bucket}/model', '--train_step=100'], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "error: Unknown command line flag 'train_step'" in result.stderr


def test_a_temporary_is_named_for_its_host_and_pid_and_put_in_place_whole(root):
    """In a bucket the object is written at its final path (it appears whole when closed); a
    block that raises leaves no temporary, and the old file where there is a rename."""
    files.makedirs(root)
    final = paths.join(root, 'train-00000-of-00001.tfrecord')
    atomic_writes.write_bytes_atomic(final, b'old')
    with atomic_writes.written_in_place(final) as temporary:
        in_bucket = root.startswith(paths.OBJECT_STORE_SCHEMES)
        assert temporary == (final if in_bucket else
                             f'{final}.tmp-{socket.gethostname()}-{os.getpid()}')
        with files.open_file(temporary, 'wb') as f:
            f.write(b'whole')
        assert files.read_bytes(final) == (b'whole' if in_bucket else b'old')
    assert files.read_bytes(final) == b'whole' and files.listdir(root) == [os.path.basename(final)]
    with pytest.raises(RuntimeError):
        with atomic_writes.written_in_place(final) as temporary:
            with files.open_file(temporary, 'wb') as f:
                f.write(b'half')
            raise RuntimeError('stopped midway')
    assert files.listdir(root) == ([] if in_bucket else [os.path.basename(final)])


def test_clean_up_removes_only_temporaries_whose_writer_is_provably_gone(tmp_path):
    """A pid says nothing about another host's process (NFS): another host's temporary stays
    until it is days old, whatever its pid; this host's goes once its pid no longer runs."""
    dead_pid = 2 ** 22 + 4321  # above pid_max's default: no live process has it
    host = socket.gethostname()
    names = {'this host, dead pid': f'a.tfrecord.tmp-{host}-{dead_pid}',
             'this host, live pid': f'b.tfrecord.tmp-{host}-{os.getpid()}',
             'another host, a pid alive here': f'c.tfrecord.tmp-other-host-{os.getpid()}',
             'another host, a pid dead here': f'd.tfrecord.tmp-other-host-{dead_pid}',
             'no host (an older release), a pid dead here': f'e.tfrecord.tmp-{dead_pid}',
             'another host, untouched for days': f'f.tfrecord.tmp-other-host-{os.getpid()}',
             'not a temporary': 'g.tfrecord'}
    for name in names.values():
        (tmp_path / name).write_bytes(b'x')
    days_ago = time.time() - atomic_writes.FOREIGN_TEMPORARY_MAX_AGE_SECS - 60
    os.utime(tmp_path / names['another host, untouched for days'], (days_ago, days_ago))
    atomic_writes.remove_abandoned_temporaries(str(tmp_path))
    removed = {what for what, name in names.items() if not (tmp_path / name).exists()}
    assert removed == {'this host, dead pid', 'another host, untouched for days'}


def test_json_value_makes_numpy_and_tensorflow_values_plain_json():
    assert type(files.json_value(np.float32(0.5))) is float
    assert type(files.json_value(np.int64(3))) is int
    assert files.json_value(np.array([[1, 2]], np.int64)) == [[1, 2]]
    assert files.json_value(np.array([b'cat', b'dog'])) == ['cat', 'dog']  # class names
    assert files.json_value([b'x', 1.5]) == ['x', 1.5]
    assert files.json_value('x') == 'x'


def test_a_bucket_json_read_cut_short_by_an_overwrite_is_read_again(monkeypatch):
    """What TF's bucket readers return when the object is replaced between their size and their
    read (common.files.TORN_READ_PAUSES_SECS); a local file is replaced by a rename, whole."""
    whole = '{"step": 12}\n'
    reads = []

    def store_answers(*answers):
        reads.clear()
        monkeypatch.setattr(files, 'read_text', lambda path: reads.append(path) or answers[
            min(len(reads), len(answers)) - 1])

    monkeypatch.setattr(files, 'TORN_READ_PAUSES_SECS', (0, 0))
    store_answers(whole[:7], whole)
    assert files.read_json('gs://bucket/x.json') == {'step': 12} and len(reads) == 2
    store_answers(whole[:7])  # damaged for good: an error after the reads again
    with pytest.raises(ValueError):
        files.read_json('s3://bucket/x.json')
    assert len(reads) == 3
    store_answers(whole[:7], whole)
    with pytest.raises(ValueError):
        files.read_json('/local/x.json')
    assert len(reads) == 1

    from trainer.serving import export  # a pointer ('best': '1602\n') read cut short
    monkeypatch.setattr(files, 'exists', lambda path: True)
    store_answers('16', '1602\n')
    assert export.read_pointer('gs://bucket/exports', 'best') == 1602 and len(reads) == 2
    store_answers('not a step\n')
    assert export.read_pointer('s3://bucket/exports', 'best') is None and len(reads) == 3
