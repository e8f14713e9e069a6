"""A model_dir's checkpoints, listed and resolved, without training."""
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
