"""Small objects written only while they are as last read: conditional writes on s3:// and gs://.

The lease objects (common/lease.py: the training lease, the eval jobs' claims) need what
tf.io.gfile cannot send: S3's `If-None-Match: *` (create) and `If-Match: ETAG` (replace), GCS's
`ifGenerationMatch` (0 to create, the generation read to replace). With them the store itself
decides which of two writers wins, however late either's request lands. They go through the
store's own client (common/s3_objects.py: boto3; common/gcs_objects.py: the JSON API), set up
from the settings TensorFlow's filesystems read; every other file still goes through
common/files. Each call is tried again while the store fails transiently (store_retries).

A store that refuses conditional writes, or ignores them (checked once a bucket and process: a
second create of the same object must fail), is a UserError naming it, at the first write.
"""
import threading
from typing import Dict, Optional, Set, Tuple

from common.errors import UserError
from common.paths import bucket_of
from common.store_clients import bucket_and_key as _split, client_for
from common.store_retries import in_store

# What a client's calls answer when a condition held no longer: another writer won.
LOST = None


class Refused(Exception):
    """The store answered a conditional write as one it does not do (a 501 NotImplemented):
    what it said, as one line."""


class ConditionalObjects:
    """A store's objects by path ('s3://bucket/key'), each with its version (S3: the ETag; GCS:
    the generation) as a string; client: an S3Objects or GcsObjects."""

    def __init__(self, client):
        self.client = client
        self._checked: Set[str] = set()  # buckets seen to enforce a create's condition
        self._lock = threading.Lock()

    def read(self, path: str) -> Optional[Tuple[bytes, str]]:
        """The object's bytes and version; None when there is none."""
        return in_store('reading', path, lambda: self.client.read(*_split(path)))

    def create(self, path: str, data: bytes) -> Optional[str]:
        """Writes the object only if there is none: its version, or LOST."""
        version = self._conditional('creating', path, lambda: self.client.create(*_split(path),
                                                                                 data))
        if version is not LOST and bucket_of(path) not in self._checked:
            self._check_enforced(path, data)
        return version

    def replace(self, path: str, data: bytes, version: str) -> Optional[str]:
        """Writes the object only while it is still at version: its new version, or LOST."""
        return self._conditional('replacing', path,
                                 lambda: self.client.replace(*_split(path), data, version))

    def delete(self, path: str, version: str) -> None:
        """Removes the object only while it is still at version (else leaves it, or nothing)."""
        self._conditional('removing', path, lambda: self.client.delete(*_split(path), version))

    def _conditional(self, operation: str, path: str, call):
        try:
            return in_store(operation, path, call)
        except Refused as refused:
            raise _refusing(path, str(refused)) from None

    def _check_enforced(self, path: str, data: bytes) -> None:
        """A store that ignored the condition would let this second create through."""
        with self._lock:
            if bucket_of(path) in self._checked:
                return
            again = self._conditional('creating', path,
                                      lambda: self.client.create(*_split(path), data))
            if again is not LOST:
                raise _refusing(path, f'a second create of the object with '
                                      f'{self.client.CREATE_CONDITION} went through')
            self._checked.add(bucket_of(path))


def _refusing(path: str, what: str) -> UserError:
    return UserError(f'{path}: {bucket_of(path)} does not do conditional writes ({what}); the '
                     'training lease and the eval jobs\' claims need them to give a model_dir '
                     'to one trainer and a checkpoint to one eval job: use a store that has '
                     'them (AWS S3, GCS) or a local --model_dir')


_STORES: Dict[int, ConditionalObjects] = {}  # by id of their client
_STORES_LOCK = threading.Lock()


def for_path(path: str) -> Optional[ConditionalObjects]:
    """The conditional objects of path's store; None for a store without them here (a local
    disk, whose lease objects are written under an OS lock, or another scheme, ram://)."""
    client = client_for(path)
    if client is None:
        return None
    with _STORES_LOCK:
        if id(client) not in _STORES:
            _STORES[id(client)] = ConditionalObjects(client)
        return _STORES[id(client)]
