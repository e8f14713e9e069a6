"""A full local disk and a read-only one (issue 38): model_dir, export_dir and prepare's output on
a small tmpfs the test mounts. Each write a full disk stops is one line naming the file and what
it was, nothing half-written is read later, and the same command resumes once space is freed; a
folder the job cannot write is one line at start."""
import json
import os
import shutil
import subprocess

import pytest
import tensorflow as tf

from helpers import assert_fragments, assert_one_line_error, run_module, trainer_user_error
from trainer.model_dir.ledger import Ledger
from trainer.serving import export


class SmallDisk:
    """A tmpfs mounted at PATH for one test (root only), filled or made read-only at will."""

    def __init__(self, path, size_mb):
        self.path, self.filler = str(path), os.path.join(str(path), 'filler')
        os.makedirs(self.path)
        result = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size_mb}m', 'tmpfs',
                                 self.path], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f'cannot mount a tmpfs here ({result.stderr.strip()})')

    def fill(self, leave_bytes=0):
        """Takes all the free space but leave_bytes."""
        stat = os.statvfs(self.path)
        with open(self.filler, 'ab') as f:
            os.posix_fallocate(f.fileno(), os.path.getsize(self.filler),
                               max(stat.f_bavail * stat.f_frsize - leave_bytes, 1))

    def free(self):
        os.remove(self.filler)

    def read_only(self):
        subprocess.run(['mount', '-o', 'remount,ro', self.path], check=True)

    def unmount(self):
        subprocess.run(['umount', '-l', self.path], check=True)


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or not shutil.which('mount'):
        pytest.skip('mounting a small tmpfs needs root and mount(8)')
    disk = SmallDisk(tmp_path / 'small', size_mb=160)
    yield disk
    disk.unmount()


def full_disk_line(result, path_prefix, what):
    return assert_one_line_error(result, 1, 'error: no space left on the disk: writing '
                                 + path_prefix, f'({what}', 'free space there, then run the same '
                                 'command again')


@pytest.mark.slow  # six trainer processes: ./run.sh test-slow
def test_training_and_evaluation_on_a_full_disk_resume_once_space_is_freed(small_disk,
                                                                           digit_shards):
    model_dir = os.path.join(small_disk.path, 'model')
    train = ['trainer.main', '--mode=train', f'--model_dir={model_dir}', '--batch_size=16',
             f'--train_files={digit_shards.train_pattern}', '--train_steps=4',
             '--save_checkpoints_steps=2']
    small_disk.fill(leave_bytes=3 << 20)  # the graph and summaries fit, a checkpoint does not
    stopped = run_module(*train, check=False)
    print(full_disk_line(stopped, model_dir, 'the checkpoint of step 0'))
    assert tf.train.latest_checkpoint(model_dir) is None  # no checkpoint named but incomplete
    small_disk.free()
    run_module(*train)
    assert tf.train.load_variable(model_dir, 'global_step') == 4

    evaluate = ['trainer.main', '--mode=evaluate', f'--model_dir={model_dir}', '--batch_size=16',
                f'--eval_files={digit_shards.validation_pattern}', '--eval_name=validation']
    small_disk.fill()  # not a byte left: found at start
    print(assert_one_line_error(run_module(*evaluate, check=False), 2, f'--model_dir={model_dir}: '
                                'cannot write there (', 'No space left on device', 'free space there'))
    small_disk.free()
    small_disk.fill(leave_bytes=64 << 10)  # room for the check, not for the evaluation's files
    stopped = run_module(*evaluate, check=False)
    print(full_disk_line(stopped, model_dir, ''))
    assert Ledger(model_dir, 'validation').entries() == []
    small_disk.free()
    run_module(*evaluate)
    assert [entry.step for entry in Ledger(model_dir, 'validation').entries()] == [4]


def test_an_export_on_a_full_disk_leaves_no_version_and_resumes(small_disk, trained_model):
    export_dir = os.path.join(small_disk.path, 'exports')
    command = ['trainer.main', '--mode=export', f'--model_dir={trained_model}',
               f'--export_dir={export_dir}']
    os.makedirs(export_dir)
    small_disk.fill(leave_bytes=1 << 20)
    stopped = run_module(*command, check=False)
    print(full_disk_line(stopped, export_dir, 'an export'))
    assert os.listdir(export_dir) == []  # no version, no staging folder
    small_disk.free()
    exported = json.loads(run_module(*command).stdout)['saved_model']
    assert export.complete_versions(export_dir) == [4] and exported == f'{export_dir}/4'


@pytest.mark.slow  # prepares the digits twice: ./run.sh test-slow
def test_prepare_on_a_full_disk_counts_no_cut_shard_and_runs_again(small_disk):
    output_dir = os.path.join(small_disk.path, 'digits')
    command = ['input_fns.prepare', 'digits', f'--output_dir={output_dir}']
    small_disk.fill(leave_bytes=600 << 10)
    stopped = run_module(*command, check=False)
    line = assert_one_line_error(stopped, 1, f'writing under {output_dir} failed', 'No space left',
                                 'run prepare again')
    print(line)
    manifest_path = os.path.join(output_dir, 'manifest.json')
    if os.path.exists(manifest_path):  # what it counts was written whole
        with open(manifest_path) as f:
            for split in json.load(f)['splits'].values():
                for shard in split['shards']:
                    path = os.path.join(output_dir, shard['file'])
                    assert sum(1 for _ in tf.data.TFRecordDataset(path)) == shard['records']
    small_disk.free()
    run_module(*command)
    with open(manifest_path) as f:
        splits = json.load(f)['splits']
    assert (splits['train']['num_records'], splits['validation']['num_records']) == (1438, 359)


def test_a_read_only_model_dir_or_export_dir_is_one_line_at_start(small_disk, trained_model,
                                                                  digit_shards):
    small_disk.read_only()
    model_dir = os.path.join(small_disk.path, 'model')
    train = run_module('trainer.main', '--mode=train', f'--model_dir={model_dir}',
                       f'--train_files={digit_shards.train_pattern}', '--train_steps=4',
                       check=False)
    print(assert_one_line_error(train, 2, f'--model_dir={model_dir}: cannot write there (',
                                'Read-only file system'))
    assert 'step' not in train.stderr.replace('--train_steps', '')
    print(assert_fragments(trainer_user_error('--mode=export', f'--model_dir={trained_model}',
                                              f'--export_dir={small_disk.path}/exports'),
                           f'--export_dir={small_disk.path}/exports: cannot write there (',
                           'Read-only file system'))
