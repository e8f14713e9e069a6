"""trainer.run.train_lock: an OS lock on a local model_dir, a lease object on a bucket."""
import time

import pytest

from common.errors import UserError
from trainer.run import train_lock


def test_local_lock_refuses_a_second_holder_until_released(tmp_path):
    first = train_lock.LocalLock(str(tmp_path / 'model'))
    first.acquire()
    with pytest.raises(UserError, match=r'is in use by another training run \(pid \d+ on '):
        train_lock.LocalLock(str(tmp_path / 'model')).acquire()
    first.release()
    second = train_lock.LocalLock(str(tmp_path / 'model'))
    second.acquire()
    second.release()


@pytest.mark.parametrize('store', ['s3', 'local'])
def test_bucket_lease_is_refreshed_and_taken_over_only_after_it_expires(store, request, tmp_path):
    # On the S3 test server, and on a local folder standing in for any other bucket.
    model_dir = (request.getfixturevalue('s3_bucket') + '/model' if store == 's3'
                 else str(tmp_path / 'model'))
    first = train_lock.Lease(model_dir, lease_secs=1.0, settle_secs=0)
    first.acquire()
    time.sleep(1.5)  # past the first expiry: only the refreshes keep it
    with pytest.raises(UserError, match='is in use by another training run'):
        train_lock.Lease(model_dir, lease_secs=1.0, settle_secs=0).acquire()

    first._stop.set()  # the holder dies without releasing: its lease lapses
    first._thread.join()
    time.sleep(1.1)
    second = train_lock.Lease(model_dir, lease_secs=1.0, settle_secs=0)
    second.acquire()
    first._thread = None  # the dead holder's release must not delete the new holder's lease
    second.release()
    assert second._read() is None  # released: the lease object is gone


def test_a_file_url_model_dir_gets_the_os_lock_not_a_lease(tmp_path):
    with train_lock.TrainLock(f'file://{tmp_path}/model') as held:
        assert isinstance(held._lock, train_lock.LocalLock)
        assert (tmp_path / 'model' / train_lock.LOCK_NAME).exists()
        with pytest.raises(UserError, match='is in use by another training run'):
            train_lock.LocalLock(str(tmp_path / 'model')).acquire()
