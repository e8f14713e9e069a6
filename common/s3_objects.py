"""S3's conditional writes and listings with sizes through boto3, for common/store_clients.py.

The client is set up from what tensorflow-io 0.36.0's s3:// reads, so the lease objects go where
the model_dir's other files go: S3_ENDPOINT (a URL; a bare host is https, as there: it reads no
S3_USE_HTTPS), S3_VERIFY_SSL, AWS_REGION, S3_CONNECT_TIMEOUT_MSEC and S3_REQUEST_TIMEOUT_MSEC
(common/store_settings.py); what botocore reads itself as the AWS SDK does: the credentials
chain (AWS_* variables, AWS_PROFILE's files, the instance's role, AWS_EC2_METADATA_DISABLED),
AWS_RETRY_MODE and AWS_MAX_ATTEMPTS, AWS_CA_BUNDLE, HTTPS_PROXY / HTTP_PROXY. Addressing is
path-style, as tensorflow-io's.
"""
import os
from typing import Dict, Optional, Tuple

from common.conditional_objects import LOST, Refused
from common.errors import UserError
from common.store_retries import TransientStoreFailure

# Answers worth another try: the store's own errors and throttling; 409: another conditional
# write of the object was under way (AWS asks for a retry).
TRANSIENT_STATUS = {409, 429, 500, 502, 503, 504}

# What the client is made from: another value, another client (conditional_objects).
SETTINGS = ('S3_ENDPOINT', 'S3_VERIFY_SSL', 'AWS_REGION', 'S3_CONNECT_TIMEOUT_MSEC',
            'S3_REQUEST_TIMEOUT_MSEC', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY',
            'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_CA_BUNDLE', 'HTTPS_PROXY', 'HTTP_PROXY')


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, '').strip().lower()
    return default if not value else value not in ('0', 'false', 'no', 'off')


def _client():
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get('S3_ENDPOINT') or None
    if endpoint and not endpoint.startswith(('http://', 'https://')):
        endpoint = 'https://' + endpoint
    verify = None if _flag('S3_VERIFY_SSL', True) else False
    config = Config(
        connect_timeout=int(os.environ.get('S3_CONNECT_TIMEOUT_MSEC', '10000')) / 1000,
        read_timeout=int(os.environ.get('S3_REQUEST_TIMEOUT_MSEC', '20000')) / 1000,
        s3={'addressing_style': 'path'})
    return boto3.session.Session().client(
        's3', endpoint_url=endpoint, verify=verify, config=config,
        region_name=os.environ.get('AWS_REGION') or None)


class S3Objects:
    """get_object, put_object with IfNoneMatch / IfMatch, delete_object with IfMatch."""
    CREATE_CONDITION = 'If-None-Match: *'

    def __init__(self):
        import botocore.exceptions
        self._errors = botocore.exceptions
        self._s3 = _client()

    def read(self, bucket: str, key: str) -> Optional[Tuple[bytes, str]]:
        try:
            answer = self._call('GetObject', bucket, key, self._s3.get_object, Bucket=bucket,
                                Key=key)
            return answer['Body'].read(), answer['ETag']
        except _Missing:
            return None
        except self._errors.BotoCoreError as e:  # the body cut short
            raise TransientStoreFailure(f'GetObject: {e}') from e

    def listed_sizes(self, bucket: str, prefix: str) -> Dict[str, int]:
        """{name after prefix: bytes} of the objects right under prefix ('a/b/'): ListObjectsV2,
        a page of 1,000 a request."""
        sizes, page_args = {}, {}
        while True:
            page = self._call('ListObjectsV2', bucket, prefix, self._s3.list_objects_v2,
                              Bucket=bucket, Prefix=prefix, Delimiter='/', **page_args)
            sizes.update((item['Key'][len(prefix):], item['Size'])
                         for item in page.get('Contents', []) if item['Key'] != prefix)
            if not page.get('IsTruncated'):
                return sizes
            page_args = {'ContinuationToken': page['NextContinuationToken']}

    def create(self, bucket: str, key: str, data: bytes) -> Optional[str]:
        return self._put(bucket, key, data, IfNoneMatch='*')

    def replace(self, bucket: str, key: str, data: bytes, version: str) -> Optional[str]:
        return self._put(bucket, key, data, IfMatch=version)

    def delete(self, bucket: str, key: str, version: str) -> None:
        try:
            self._call('DeleteObject If-Match', bucket, key, self._s3.delete_object,
                       Bucket=bucket, Key=key, IfMatch=version)
        except (_Missing, _Lost):
            pass  # gone already, or another's now

    def _put(self, bucket, key, data, **condition) -> Optional[str]:
        header = 'If-None-Match: *' if 'IfNoneMatch' in condition else 'If-Match'
        try:
            return self._call(f'PutObject {header}', bucket, key, self._s3.put_object,
                              Bucket=bucket, Key=key, Body=data,
                              ContentType='application/json', **condition)['ETag']
        except _Lost:
            return LOST

    def _call(self, operation: str, bucket: str, key: str, call, **args):
        """call(**args); its answer's failures as _Missing, _Lost, Refused,
        TransientStoreFailure or UserError."""
        try:
            return call(**args)
        except self._errors.ClientError as e:
            status = e.response.get('ResponseMetadata', {}).get('HTTPStatusCode')
            error = e.response.get('Error', {})
            code, message = error.get('Code', ''), error.get('Message', '')
            said = f'{status} {code}: {message}'.strip()
            if status == 412 or code == 'PreconditionFailed':
                raise _Lost() from None
            if code in ('NoSuchKey', '404') and key:
                raise _Missing() from None
            if status == 501 or code == 'NotImplemented':
                raise Refused(f'{operation} answered {said}') from None
            if status in TRANSIENT_STATUS or code in ('SlowDown', 'RequestTimeout'):
                raise TransientStoreFailure(f'{operation}: {said}') from e
            raise UserError(f's3://{bucket}/{key}: {operation} answered {said}') from None
        except (self._errors.ConnectionError, self._errors.HTTPClientError) as e:
            raise TransientStoreFailure(f'{operation}: {e}') from e


class _Missing(Exception):
    """No such object."""


class _Lost(Exception):
    """412: the object is not as the condition said."""


Client = S3Objects
