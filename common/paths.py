"""What kind of place a path names: a local disk, or a bucket (every other filesystem).

The one answer to "is this a bucket?": the file helpers, the bucket probe and the training
lock all ask here. A plain path or file:// is a POSIX disk, with atomic rename and OS locks;
gs://, s3:// and other schemes (ram:// in tests) have neither, so writers there put whole
objects and the training lock is a lease object.
"""
import os
import posixpath

# Buckets whose writes are whole-object puts (atomic by themselves), probed before first use.
OBJECT_STORE_SCHEMES = ('gs://', 's3://')


def is_local(path: str) -> bool:
    """A plain path or file://: a POSIX disk, with atomic rename and locks."""
    return '://' not in path or path.startswith('file://')


def is_bucket(path: str) -> bool:
    """gs://, s3:// or another filesystem without atomic rename or locks."""
    return not is_local(path)


def local_path(path: str) -> str:
    return path[len('file://'):] if path.startswith('file://') else path


def join(*parts: str) -> str:
    return posixpath.join(*parts) if is_bucket(parts[0]) else os.path.join(*parts)


def bucket_of(path: str) -> str:
    """'s3://bucket/a/b' -> 's3://bucket'."""
    scheme, rest = path.split('://', 1)
    return f'{scheme}://{rest.split("/", 1)[0]}'


def as_folder(path: str) -> str:
    """A bucket's root as a folder TF's clients list: 's3://bucket' -> 's3://bucket/'
    (tensorflow-io finds no folder 's3://bucket'); any other path as it is."""
    if path.startswith(OBJECT_STORE_SCHEMES) and path.rstrip('/') == bucket_of(path):
        return bucket_of(path) + '/'
    return path
