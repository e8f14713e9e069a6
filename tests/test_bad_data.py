"""Bad data stops with a one-line error naming the file, before anything is trained or recorded.

Issue 11, cases 1, 6, 10, 11 (data files) and 13 (CSV labels): each test runs the CLI as a
user would, on real files damaged the way the issue's reproductions damaged them.
"""
import json
import os
import shutil
import socket

import numpy as np
import pytest

from common.errors import UserError
from helpers import (assert_fragments, assert_one_line_error, run_module, run_with_env,
                     trainer_user_error)
from input_fns.faces import synthetic_faces
from input_fns.records import file_patterns, pipeline, shards
from trainer.model_dir.ledger import Ledger


def copy_shards(digit_shards, destination):
    shutil.copytree(digit_shards.dir, destination)
    return str(destination)


def first_record_end(path):
    """Byte offset just past a TFRecord file's first record (8 length + 4 crc + data + 4 crc)."""
    with open(path, 'rb') as f:
        length = int.from_bytes(f.read(8), 'little')
    return 8 + 4 + length + 4


@pytest.mark.parametrize('damage', ['empty', 'cut_at_record_boundary'])
def test_shard_shorter_than_its_manifest_stops_before_training(digit_shards, tmp_path, damage):
    data = copy_shards(digit_shards, tmp_path / 'data')
    shard = os.path.join(data, 'train-00001-of-00004.tfrecord')
    keep = 0 if damage == 'empty' else first_record_end(shard)
    with open(shard, 'r+b') as f:
        f.truncate(keep)
    model_dir = tmp_path / 'model'
    line = trainer_user_error('--mode=train', f'--model_dir={model_dir}',
                              f'--train_files={data}/train-*', '--train_steps=2', '--batch_size=16')
    assert_fragments(line, shard, f'{keep} bytes', 'manifest.json', 'prepare')
    assert not os.path.exists(model_dir / 'train_finished.json')


def test_evaluation_on_a_cut_shard_is_an_error_not_a_ledger_entry(digit_shards, trained_model,
                                                                   tmp_path):
    data = copy_shards(digit_shards, tmp_path / 'data')
    shard = os.path.join(data, 'validation-00000-of-00002.tfrecord')
    with open(shard, 'r+b') as f:
        f.truncate(first_record_end(shard))
    model_dir = shutil.copytree(trained_model, tmp_path / 'model')
    result = run_module('trainer.main', '--mode=evaluate', f'--model_dir={model_dir}',
                        f'--eval_files={data}/validation-*', '--eval_name=cut', check=False)
    assert_one_line_error(result, 2, shard, 'manifest.json')
    assert Ledger(str(model_dir), 'cut').entries() == []


def test_a_folder_given_for_its_files_names_the_globs_of_its_splits(digit_shards, tmp_path):
    line = trainer_user_error('--mode=train', f'--model_dir={tmp_path}/model',
                              f'--train_files={digit_shards.dir}/', '--train_steps=2')
    assert_fragments(line, f'--train_files={digit_shards.dir}/: a folder; give the '
                          f"files of one of its splits: --train_files='{digit_shards.dir}/train-*' "
                          f"(train), or --train_files='{digit_shards.dir}/validation-*' "
                          '(validation)')
    assert not os.path.exists(tmp_path / 'model' / 'checkpoint')

    (tmp_path / 'records').mkdir()  # no manifest: nothing says what the files are
    with pytest.raises(UserError, match=r"--eval_files=.*records: a folder, with no "
                                        r'manifest.json of prepared shards; write shards with'):
        pipeline.list_record_files(str(tmp_path / 'records'), '--eval_files')
    shards.write_manifest(str(tmp_path / 'records'), {'splits': {'train': {'shards': [
        {'file': 'part-0.tfrecord.gz', 'records': 1}]}}})  # records read in place
    with pytest.raises(UserError, match=r"--train_files=.*records: a folder; give its files: "
                                        r"--train_files='.*records/\*'$"):
        file_patterns.read_schema(str(tmp_path / 'records'), '--train_files')


def test_training_on_only_empty_files_is_an_error(tmp_path):
    data = tmp_path / 'data'  # no manifest.json: nothing to compare with but the files themselves
    data.mkdir()
    for i in range(2):
        (data / f'train-{i}.tfrecord').write_bytes(b'')
    model_dir = tmp_path / 'model'
    assert_fragments(trainer_user_error('--mode=train', f'--model_dir={model_dir}',
                                        f'--train_files={data}/train-*', '--train_steps=2'),
                     '--train_files', 'no records')
    assert not os.path.exists(model_dir / 'train_finished.json')


def test_evaluation_on_only_empty_files_is_an_error_and_never_best(trained_model, tmp_path):
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'validation-0.tfrecord').write_bytes(b'')
    model_dir = shutil.copytree(trained_model, tmp_path / 'model')
    result = run_module('trainer.main', '--mode=evaluate', f'--model_dir={model_dir}',
                        f'--eval_files={data}/validation-*', '--eval_name=empty',
                        f'--export_dir={tmp_path}/exports', check=False)
    assert_one_line_error(result, 2, '--eval_files', 'no records')
    assert Ledger(str(model_dir), 'empty').entries() == []
    assert not os.path.exists(tmp_path / 'exports' / 'best')


def test_csv_model_given_tfrecord_shards_names_the_file(digit_shards, tmp_path):
    result = run_module('trainer.main', '--model=csv_mlp', '--mode=train',
                        f'--model_dir={tmp_path}/model', f'--train_files={digit_shards.train_pattern}',
                        '--train_steps=2', check=False)
    assert_one_line_error(result, 2, os.path.join(digit_shards.dir, 'train-00000-of-00004.tfrecord'),
                          'CSV')


def write_csv(path, rows, num_features=1024, label_of_row=lambda i: i % 2):
    rng = np.random.RandomState(0)
    with open(path, 'w') as f:
        for i in range(rows):
            f.write(','.join(f'{v:.2f}' for v in rng.standard_normal(num_features))
                    + f',{label_of_row(i)}\n')


def test_csv_label_outside_0_1_mid_file_names_the_file(tmp_path):
    data = tmp_path / 'data'
    data.mkdir()
    write_csv(data / 'train-0.csv', 40)
    write_csv(data / 'train-1.csv', 40, label_of_row=lambda i: 2 if i == 30 else i % 2)
    result = run_module('trainer.main', '--model=csv_mlp', '--mode=train',
                        f'--model_dir={tmp_path}/model', f'--train_files={data}/train-*',
                        '--train_steps=20', '--batch_size=8', check=False)
    assert_one_line_error(result, 2, data / 'train-1.csv', 'label')


def test_bad_tf_config_json_is_one_line_error(digit_shards, tmp_path):
    result = run_with_env('trainer.main', '--mode=train', f'--model_dir={tmp_path}/model',
                          f'--train_files={digit_shards.train_pattern}', '--train_steps=2',
                          env={'TF_CONFIG': '{"cluster": '})
    assert_one_line_error(result, 2, 'TF_CONFIG')


def prepare_csv_args(output_dir):
    return ['csv_example', f'--output_dir={output_dir}', '--num_shards=2', '--num_eval_shards=1',
            '--rows_per_shard=5', '--num_features=4']


def test_prepare_removes_a_killed_prepares_leftovers(tmp_path):
    """This host's, by its dead pid; another host's (on a shared disk) is left to its writer,
    which may be writing it still: a pid is no one's here."""
    out = tmp_path / 'csv'
    out.mkdir()
    dead_pid = 2 ** 22 + 1  # above pid_max's default: no live process has it
    leftover = out / f'train-00000-of-00002.csv.tmp-{socket.gethostname()}-{dead_pid}'
    another_hosts = out / f'train-00001-of-00002.csv.tmp-another-host-{dead_pid}'
    for temporary in (leftover, another_hosts):
        temporary.write_text('1,2,3,4,0\n')
    run_module('input_fns.prepare', *prepare_csv_args(out))
    assert not leftover.exists() and another_hosts.exists()
    manifest = json.load(open(out / 'manifest.json'))
    for shard in manifest['splits']['train']['shards']:  # sizes the input check compares
        assert shard['bytes'] == os.path.getsize(out / shard['file']) and shard['records'] == 5


def test_prepare_output_dir_under_a_file(tmp_path):
    (tmp_path / 'afile').write_text('')
    result = run_module('input_fns.prepare', *prepare_csv_args(tmp_path / 'afile' / 'csv'),
                        check=False)
    assert_one_line_error(result, 2, f'--output_dir={tmp_path}/afile/csv')


def test_prepare_disk_full_is_one_line_error(tmp_path):
    import resource
    import signal

    def small_file_limit():  # writes past 2 KB fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    out = tmp_path / 'csv'
    result = run_with_env('input_fns.prepare', 'csv_example', f'--output_dir={out}', '--num_shards=2',
                          '--rows_per_shard=50', '--num_features=64', preexec_fn=small_file_limit)
    assert_one_line_error(result, 1, str(out))
    assert not [name for name in os.listdir(out) if '.tmp-' in name]


def test_prepare_face_pairs_binary_pairs_file(tmp_path):
    (tmp_path / 'lfw').mkdir()
    pairs = tmp_path / 'pairs.txt'
    pairs.write_bytes(bytes(range(256)) * 4)
    result = run_module('input_fns.prepare', 'face_pairs', f'--source_dir={tmp_path}/lfw',
                        f'--pairs_file={pairs}', f'--output_dir={tmp_path}/out', check=False)
    assert_one_line_error(result, 2, pairs)


def test_prepare_faces_refuses_photos_training_cannot_decode(tmp_path):
    root = tmp_path / 'lfw'
    synthetic_faces.write_faces(str(root), num_people=4, min_photos=2, max_photos=2, size=32,
                                seed=0)
    person = sorted(os.listdir(root))[0]
    cut_short = root / person / f'{person}_0001.jpg'  # a download that stopped: its header whole
    cut_short.write_bytes(cut_short.read_bytes()[:300])
    strict = run_module('input_fns.prepare', 'faces', f'--source_dir={root}',
                        f'--output_dir={tmp_path}/strict', '--num_pairs=2', '--strict',
                        check=False)
    assert_one_line_error(strict, 2, cut_short)

    lenient = run_module('input_fns.prepare', 'faces', f'--source_dir={root}',
                         f'--output_dir={tmp_path}/out', '--num_pairs=2')
    assert f'skipping {cut_short}' in lenient.stderr
    manifest = json.load(open(tmp_path / 'out' / 'manifest.json'))
    skipped = {split: entry.get('num_skipped_photos', 0)
               for split, entry in manifest['splits'].items() if entry.get('kind') != 'pairs'}
    assert sum(skipped.values()) == 1


def test_a_comma_inside_a_path_is_written_backslash_comma(tmp_path):
    from input_fns.records import pipeline
    folder = tmp_path / 'runs,2026'
    folder.mkdir()
    (folder / 'train-0.tfrecord').write_bytes(b'x')
    (tmp_path / 'extra.tfrecord').write_bytes(b'x')
    files = pipeline.list_record_files(f'{tmp_path}/runs\\,2026/train-*,{tmp_path}/extra.tfrecord')
    assert files == [f'{tmp_path}/extra.tfrecord', f'{folder}/train-0.tfrecord']
