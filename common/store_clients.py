"""The stores' own clients (common/s3_objects.py: boto3; common/gcs_objects.py: the JSON API), one
a process and settings, for what tf.io.gfile cannot ask: conditional writes
(common/conditional_objects.py) and a folder's listing with each object's size (common/files.py).
"""
import os
import threading
from typing import Dict, Optional, Tuple

_CLIENTS: Dict[Tuple, object] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(path: str):
    """The client of path's store (s3:// or gs://), or None for another scheme. One a process
    and settings: it keeps its connections, and follows a changed endpoint or proxy."""
    if path.startswith('s3://'):
        from common import s3_objects as client_module
    elif path.startswith('gs://'):
        from common import gcs_objects as client_module
    else:
        return None
    key = (path[:2], *(os.environ.get(name) for name in client_module.SETTINGS))
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = client_module.Client()
        return _CLIENTS[key]


def bucket_and_key(path: str) -> Tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b')."""
    bucket, _, key = path.split('://', 1)[1].partition('/')
    return bucket, key


def listed_sizes(folder: str) -> Optional[Dict[str, int]]:
    """{name: bytes} of the objects right in a bucket's folder (not in its subfolders), from the
    store's listing, which gives each object's size (S3 ListObjectsV2, GCS objects.list: 1,000
    objects a request); None for another scheme."""
    client = client_for(folder)
    if client is None:
        return None
    bucket, key = bucket_and_key(folder)
    return client.listed_sizes(bucket, key.strip('/') + '/' if key.strip('/') else '')
