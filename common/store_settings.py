"""What TensorFlow's store clients get wrong here: retries, timeouts, caches, the read buffer.

TensorFlow's clients read them from environment variables: TF's GCS filesystem (TSL's
RetryingGcsFileSystem) when TensorFlow is imported, tensorflow-io's S3 filesystem (the AWS
SDK) when it makes its first client. So the packages with commands (trainer, input_fns) set
them on import, before anything imports TensorFlow; a value the user set wins.

The defaults let one call on a stalled store take an hour (S3: 5 min to connect, 5 min without
a byte, 11 tries; GCS: 2 min to connect, 1 min without a byte, 11 tries with up to 32 s
between). Every command here resumes when run again, and a training lease or an eval claim is
renewed every --lease_timeout_secs / 4 (30 s) and taken over after 120 s of silence: a call
should fail within about a minute, with a one-line error, rather than hang. A store that
answers errors (500, 503 SlowDown, 429) is still retried with backoff, fewer times.
"""
import os
from typing import Dict, MutableMapping

DEFAULTS = {
    # tensorflow-io's S3 client (docs/data.md, "Retries and timeouts").
    'S3_CONNECT_TIMEOUT_MSEC': '10000',   # was 300000
    'S3_REQUEST_TIMEOUT_MSEC': '20000',   # no byte for this long (not the whole transfer); was 300000
    'AWS_RETRY_MODE': 'standard',         # jittered exponential backoff; legacy waits 50 ms..13 s
    'AWS_MAX_ATTEMPTS': '3',              # was 11 (legacy)
    # tensorflow-io 0.36.0's multi-part download writes a failed attempt's error body into the
    # caller's buffer and keeps it after a retry succeeds: a read after one 500, 503 or 429
    # returns '<?xml...<Error>' in place of the object's first bytes (tests/test_store_faults.py).
    # Single GETs are retried by the AWS SDK into a fresh buffer.
    'S3_DISABLE_MULTI_PART_DOWNLOAD': '1',
    # TF's GCS client.
    'GCS_REQUEST_CONNECTION_TIMEOUT_SECS': '10',  # was 120
    'GCS_REQUEST_IDLE_TIMEOUT_SECS': '20',        # no byte for this long; was 60
    'GCS_RETRY_CONFIG_MAX_RETRIES': '3',          # after 1, 2 and 4 s (jittered); was 10
    # TF's GCS client caches each file's size for 5 s and GFile.read() reads that many bytes: a
    # file another process rewrote (a lease, a claim, a pointer) read cut short or refused.
    'GCS_STAT_CACHE_MAX_AGE': '0',                # was 5
    # TF's GCS client zero-fills a buffer of this size for every file it reads (FillBuffer's
    # resize): 64 MiB, ~50 ms of CPU, for each one-row shard; evaluating 2,000 of them on a
    # 2-core machine was CPU-bound in it. 8 MiB reads a large shard in 8 MiB ranges (two 256 MiB
    # shards, one at a time, 20 ms a request: 172 MiB/s against 198) and holds 64 MiB, not 512,
    # for 8 open files.
    'GCS_READ_CACHE_BLOCK_SIZE_MB': '8',          # was 64
}


def apply_defaults(environ: MutableMapping[str, str] = os.environ) -> Dict[str, str]:
    """Sets each unset (or empty) variable of DEFAULTS; returns those it set."""
    applied = {name: value for name, value in DEFAULTS.items() if not environ.get(name)}
    environ.update(applied)
    return applied
