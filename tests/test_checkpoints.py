"""A model_dir's checkpoints, listed and resolved, without training."""
import tensorflow as tf
from tensorflow.python.lib.io import file_io

from common import file_trees, store_retries
from helpers import write_fake_checkpoints
from trainer.model_dir import checkpoints


def test_list_checkpoints_lists_all_but_ones_newer_than_the_state_file(tmp_path):
    # 30: a trainer killed while saving it; 5 and 10: older than keep_checkpoint_max remembers.
    write_fake_checkpoints(tmp_path, [5, 10, 20, 30], newest_saved=20)
    assert checkpoints.list_checkpoints(str(tmp_path)) == [
        (5, str(tmp_path / 'model.ckpt-5')), (10, str(tmp_path / 'model.ckpt-10')),
        (20, str(tmp_path / 'model.ckpt-20'))]
    assert checkpoints.list_checkpoints(str(tmp_path / 'not_yet')) == []
    assert checkpoints.resolve(str(tmp_path), 'latest') == [(20, str(tmp_path / 'model.ckpt-20'))]


def test_a_checkpoint_is_deleted_only_when_its_folder_does_not_list_it_either(tmp_path,
                                                                             monkeypatch):
    write_fake_checkpoints(tmp_path, [5], newest_saved=5)
    path = str(tmp_path / 'model.ckpt-5')
    assert not checkpoints.deleted(path)
    # A store whose stat requests fail answers "does not exist"; the listing still has it.
    monkeypatch.setattr(checkpoints.files, 'exists', lambda _: False)
    assert not checkpoints.deleted(path)
    (tmp_path / 'model.ckpt-5.index').unlink()
    assert checkpoints.deleted(path)


def test_a_state_file_the_bucket_failed_to_give_is_read_again_not_no_checkpoint(
        tmp_path, s3_bucket, monkeypatch):
    """TensorFlow's get_checkpoint_state logs a failed read and answers None, as for no state
    file: under 20% store errors on gs:// an export stopped with 'no checkpoint yet'."""
    write_fake_checkpoints(tmp_path, [5, 10], newest_saved=10)
    model_dir = f'{s3_bucket}/model'
    file_trees.copy_tree(str(tmp_path), model_dir)
    monkeypatch.setattr(store_retries, 'STORE_BACKOFF_SECS', 0.01)
    read_file_to_string, failures = file_io.read_file_to_string, []

    def failing_once(path, *args):
        if path.endswith('/checkpoint') and not failures:
            failures.append(path)  # what TF's GCS client raises once its own retries failed
            raise tf.errors.AbortedError(None, None, 'All 3 retry attempts failed. The last '
                                         'failure: HTTP response code 429')
        return read_file_to_string(path, *args)

    monkeypatch.setattr(file_io, 'read_file_to_string', failing_once)
    assert checkpoints.resolve(model_dir, 'latest') == [(10, f'{model_dir}/model.ckpt-10')]
    assert failures == [f'{model_dir}/checkpoint']
