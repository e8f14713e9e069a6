"""GCS's conditional writes and listings with sizes through its JSON API (plain HTTPS), for
common/store_clients.py.

Set up from what TensorFlow's gs:// reads, so the lease objects go where the model_dir's other
files go: the API at https://www.googleapis.com (TF has no endpoint setting), through
https_proxy / HTTPS_PROXY (libcurl's, unless no_proxy names the host), trusting CURL_CA_BUNDLE
when set; the token GOOGLE_AUTH_TOKEN_FOR_TESTING, else the application default credentials
(GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server: google-auth, which TensorBoard
already brings); GCS_REQUEST_CONNECTION_TIMEOUT_SECS and GCS_REQUEST_IDLE_TIMEOUT_SECS
(common/store_settings.py).

Objects are written by multipart uploads: fake-gcs-server 1.54.0, the tests' GCS, enforces
ifGenerationMatch on those but not on uploadType=media uploads nor on deletes.
"""
import http.client
import json
import os
import socket
import ssl
import threading
import urllib.parse
import uuid
from typing import Dict, Optional, Tuple

from common.conditional_objects import LOST, Refused
from common.errors import UserError
from common.store_retries import TransientStoreFailure

HOST = 'www.googleapis.com'
SCOPE = 'https://www.googleapis.com/auth/devstorage.read_write'
TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}

# What the client is made from: another value, another client (conditional_objects).
SETTINGS = ('https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY', 'CURL_CA_BUNDLE',
            'GOOGLE_APPLICATION_CREDENTIALS', 'GCS_REQUEST_CONNECTION_TIMEOUT_SECS',
            'GCS_REQUEST_IDLE_TIMEOUT_SECS')


def _proxy() -> Optional[Tuple[str, int]]:
    url = os.environ.get('https_proxy') or os.environ.get('HTTPS_PROXY')
    no_proxy = os.environ.get('no_proxy') or os.environ.get('NO_PROXY') or ''
    if not url or any(name.strip() in ('*', HOST) or HOST.endswith('.' + name.strip().lstrip('.'))
                      for name in no_proxy.split(',') if name.strip()):
        return None
    parts = urllib.parse.urlsplit(url if '://' in url else 'http://' + url)
    return parts.hostname, parts.port or 80


class GcsObjects:
    """GET ?alt=media, multipart uploads and DELETE with ifGenerationMatch."""
    CREATE_CONDITION = 'ifGenerationMatch=0'

    def __init__(self):
        self._tls = ssl.create_default_context(cafile=os.environ.get('CURL_CA_BUNDLE') or None)
        self._connect_secs = float(os.environ.get('GCS_REQUEST_CONNECTION_TIMEOUT_SECS', '10'))
        self._idle_secs = float(os.environ.get('GCS_REQUEST_IDLE_TIMEOUT_SECS', '20'))
        self._credentials = None
        self._token_lock = threading.Lock()

    def read(self, bucket: str, key: str) -> Optional[Tuple[bytes, str]]:
        status, headers, body = self._request('GET', f'/storage/v1/b/{bucket}/o/{_quoted(key)}',
                                              {'alt': 'media'})
        if status == 404:
            return None
        self._check('reading', bucket, key, status, body)
        return body, headers['x-goog-generation']

    def listed_sizes(self, bucket: str, prefix: str) -> Dict[str, int]:
        """{name after prefix: bytes} of the objects right under prefix ('a/b/'): objects.list,
        a page of 1,000 a request."""
        sizes, page_args = {}, {}
        while True:
            status, _, body = self._request('GET', f'/storage/v1/b/{bucket}/o', {
                'prefix': prefix, 'delimiter': '/', 'fields': 'items(name,size),nextPageToken',
                **page_args})
            self._check('listing', bucket, prefix, status, body)
            page = json.loads(body)
            sizes.update((item['name'][len(prefix):], int(item['size']))
                         for item in page.get('items', []) if item['name'] != prefix)
            if not page.get('nextPageToken'):
                return sizes
            page_args = {'pageToken': page['nextPageToken']}

    def create(self, bucket: str, key: str, data: bytes) -> Optional[str]:
        return self._upload(bucket, key, data, '0')

    def replace(self, bucket: str, key: str, data: bytes, version: str) -> Optional[str]:
        return self._upload(bucket, key, data, version)

    def delete(self, bucket: str, key: str, version: str) -> None:
        status, _, body = self._request('DELETE', f'/storage/v1/b/{bucket}/o/{_quoted(key)}',
                                        {'ifGenerationMatch': version})
        if status not in (404, 412):  # gone already, or another's now
            self._check('removing', bucket, key, status, body)

    def _upload(self, bucket, key, data, generation) -> Optional[str]:
        boundary = uuid.uuid4().hex
        metadata = json.dumps({'name': key, 'contentType': 'application/json'})
        body = (f'--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n'
                f'{metadata}\r\n--{boundary}\r\nContent-Type: application/json\r\n\r\n'
                ).encode() + data + f'\r\n--{boundary}--\r\n'.encode()
        status, _, answer = self._request(
            'POST', f'/upload/storage/v1/b/{bucket}/o',
            {'uploadType': 'multipart', 'ifGenerationMatch': generation}, body,
            {'Content-Type': f'multipart/related; boundary={boundary}'})
        if status == 412:
            return LOST
        if status == 501:
            raise Refused(f'an upload with ifGenerationMatch={generation} answered 501: '
                          f'{_said(answer)}')
        self._check('writing', bucket, key, status, answer)
        return str(json.loads(answer)['generation'])

    def _check(self, operation, bucket, key, status, body) -> None:
        if status in (200, 204):
            return
        said = f'{status}: {_said(body)}'
        if status in TRANSIENT_STATUS:
            raise TransientStoreFailure(f'{operation} gs://{bucket}/{key}: {said}')
        raise UserError(f'gs://{bucket}/{key}: {operation} answered {said}')

    def _request(self, method, path, params, body=None, headers=None):
        """(status, headers with lower-case names, body); a failed connection is transient."""
        headers = dict(headers or {}, Authorization=f'Bearer {self._token()}')
        target = f'{path}?{urllib.parse.urlencode(params)}'
        proxy = _proxy()
        connection = http.client.HTTPSConnection(*(proxy or (HOST, 443)), context=self._tls,
                                                 timeout=self._connect_secs)
        try:
            if proxy:
                connection.set_tunnel(HOST, 443)
            connection.connect()
            connection.sock.settimeout(self._idle_secs)  # no byte for this long
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            return (response.status, {k.lower(): v for k, v in response.getheaders()}, answer)
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            raise TransientStoreFailure(f'{method} https://{HOST}{path}: {e!r}') from e
        finally:
            connection.close()

    def _token(self) -> str:
        testing = os.environ.get('GOOGLE_AUTH_TOKEN_FOR_TESTING')
        if testing:
            return testing
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests
        with self._token_lock:
            try:
                if self._credentials is None:
                    self._credentials, _ = google.auth.default(scopes=[SCOPE])
                if not self._credentials.valid:
                    self._credentials.refresh(google.auth.transport.requests.Request())
            except google.auth.exceptions.DefaultCredentialsError as e:
                raise UserError(f'gs://: no Google credentials ({e}); set '
                                'GOOGLE_APPLICATION_CREDENTIALS to a key file') from None
            except google.auth.exceptions.GoogleAuthError as e:  # the token server failed
                raise TransientStoreFailure(f'a Google access token: {e}') from e
            return self._credentials.token


def _quoted(key: str) -> str:
    return urllib.parse.quote(key, safe='')


def _said(body: bytes) -> str:
    """The message of a JSON API error, else the body's first line."""
    try:
        return json.loads(body)['error']['message']
    except (ValueError, KeyError, TypeError):
        return (body.decode('utf-8', 'replace').strip().splitlines() or [''])[0][:200]


Client = GcsObjects
