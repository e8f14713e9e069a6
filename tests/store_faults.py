"""A fault-injecting HTTP proxy between TensorFlow and a store server on 127.0.0.1 (issue 38).

Real object stores answer 500, 503 SlowDown and 429, reset connections, stall for seconds and
cut responses short. This proxy forwards every request to the store server (moto for s3://,
fake-gcs-server behind the gs:// fixture's TLS forwarder) and, on a seeded schedule, does one
of those instead on a share of the requests of each kind (GET, HEAD, LIST, PUT, COPY, DELETE,
MULTIPART), counting requests and faults by kind for the run to print.

No well-kept tool does this here: toxiproxy injects TCP faults only (no HTTP status codes);
mitmproxy's last release for Python 3.11 (11.0.2) brings 27 packages and would downgrade the
Flask that moto's server runs on; moto's server injects no faults.

The schedule is seeded per kind: the n-th request of a kind meets the same fault in every run
with the same seed, whatever the other kinds' requests did meanwhile.
"""
import collections
import contextlib
import dataclasses
import http.client
import http.server
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
from typing import Dict, Optional, Tuple

from tests.threaded_server import ServedInThread

KINDS = ('GET', 'HEAD', 'LIST', 'PUT', 'COPY', 'DELETE', 'MULTIPART')
ERRORS = {500: 'InternalError', 503: 'SlowDown', 429: 'TooManyRequests'}
FAULTS = ('500', '503', '429', 'reset', 'stall', 'cut')
# Headers that describe one connection, not the message, or that the proxy sets itself.
NOT_PASSED = {'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te',
              'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate',
              'expect',  # this proxy answered '100 Continue' itself
              'date', 'server'}  # the proxy's own answer has them


@dataclasses.dataclass(frozen=True)
class FaultMix:
    """What share of each kind's requests meets each fault.

    shares: fault ('500', '503', '429', 'reset', 'stall', 'cut') -> share of requests (0..1);
    kinds: the request kinds they apply to; stall_secs: a stall's range, drawn uniformly.
    A 'cut' (the body cut short, then the connection reset) needs a body: on a request whose
    answer has none it is a reset.
    """
    name: str
    shares: Dict[str, float]
    kinds: Tuple[str, ...] = KINDS
    stall_secs: Tuple[float, float] = (1.0, 10.0)

    def __post_init__(self):
        unknown = set(self.shares) - set(FAULTS) or set(self.kinds) - set(KINDS)
        if unknown or sum(self.shares.values()) > 1:
            raise ValueError(f'fault mix {self.name}: unknown {sorted(unknown)} or shares over 1')


def errors(name: str, share: float) -> FaultMix:
    """500, 503 SlowDown and 429 in equal parts, on share of every kind's requests."""
    return FaultMix(name, {str(status): share / 3 for status in ERRORS})


NO_FAULTS = FaultMix('none', {})
MIXES = {mix.name: mix for mix in (
    errors('errors-5%', 0.05),
    errors('errors-20%', 0.20),
    FaultMix('stalls', {'stall': 0.03}),
    FaultMix('resets', {'reset': 0.03, 'cut': 0.02}),
)}


def s3_kind(method: str, path: str, query: str, headers) -> str:
    """An S3 request's kind (path-style addressing: /bucket/key)."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    if method == 'POST' or 'uploadId' in params or 'uploads' in params:
        return 'MULTIPART'
    if method == 'PUT':
        return 'COPY' if headers.get('x-amz-copy-source') else 'PUT'
    if method in ('DELETE', 'HEAD'):
        return method
    key = path.lstrip('/').partition('/')[2]
    return 'GET' if key else 'LIST'


def gcs_kind(method: str, path: str, query: str, headers) -> str:
    """A GCS JSON-API request's kind, as TensorFlow's GCS filesystem makes them."""
    if method == 'DELETE':
        return 'DELETE'
    if '/rewriteTo/' in path or '/copyTo/' in path:
        return 'COPY'
    if path.startswith('/upload/'):  # a resumable upload: started by POST, its body PUT
        return 'PUT'
    if path.startswith('/storage/v1/b/'):
        rest = path[len('/storage/v1/b/'):].split('/')
        if len(rest) == 2 and rest[1] == 'o':
            return 'LIST'
        params = urllib.parse.parse_qs(query)
        return 'GET' if params.get('alt') == ['media'] else 'HEAD'  # HEAD: metadata (stat)
    return 'GET'  # storage.googleapis.com/BUCKET/OBJECT: a (ranged) read


# AWS S3 throttles with 503 SlowDown; a 429 here carries the same code. With a code the AWS SDK
# does not know (TooManyRequests) it does not retry the request at all: under 20% errors the
# trainer then seldom finished a checkpoint save (8 runs of 6 tries each stuck at step 0).
S3_CODES = {**ERRORS, 429: 'SlowDown'}


def s3_error(status: int) -> Tuple[str, bytes]:
    return 'application/xml', ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                               f'{S3_CODES[status]}</Code><Message>injected by the test</Message>'
                               '</Error>').encode()


def gcs_error(status: int) -> Tuple[str, bytes]:
    return 'application/json', (f'{{"error": {{"code": {status}, "message": "{ERRORS[status]}: '
                                'injected by the test"}}').encode()


STORES = {'s3': (s3_kind, s3_error), 'gcs': (gcs_kind, gcs_error)}


class Schedule:
    """Which fault (or None) the n-th request of a kind meets, from the seed alone."""

    def __init__(self, mix: FaultMix, seed: int):
        self.mix, self.seed = mix, seed

    def fault(self, kind: str, n: int) -> Optional[str]:
        if kind not in self.mix.kinds:
            return None
        draw = random.Random(f'{self.seed}/{kind}/{n}').random()
        for fault, share in sorted(self.mix.shares.items()):
            if draw < share:
                return fault
            draw -= share
        return None

    def stall_secs(self, kind: str, n: int) -> float:
        return random.Random(f'{self.seed}/{kind}/{n}/stall').uniform(*self.mix.stall_secs)


class Counts:
    """Requests and faults by kind, counted as they happen (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = collections.Counter()
        self.faults = collections.defaultdict(collections.Counter)

    def next_request(self, kind: str) -> int:
        with self._lock:
            self.requests[kind] += 1
            return self.requests[kind] - 1

    def fault(self, kind: str, fault: str) -> None:
        with self._lock:
            self.faults[kind][fault] += 1

    def total_faults(self) -> int:
        return sum(sum(by_fault.values()) for by_fault in self.faults.values())

    def as_dict(self) -> Dict:
        with self._lock:
            return {kind: {'requests': self.requests[kind], **dict(self.faults[kind])}
                    for kind in KINDS if self.requests[kind]}

    def table(self) -> str:
        """'kind requests 500 503 429 reset stall cut' rows and a total."""
        rows = self.as_dict()
        header = f'{"kind":<10}{"requests":>9}' + ''.join(f'{f:>7}' for f in FAULTS)
        lines = [header]
        for kind, row in [*rows.items(), ('total', {
                key: sum(r.get(key, 0) for r in rows.values()) for key in ('requests', *FAULTS)})]:
            lines.append(f'{kind:<10}{row["requests"]:>9}'
                         + ''.join(f'{row.get(f, 0):>7}' for f in FAULTS))
        return '\n'.join(lines)


def _reset(connection: socket.socket) -> None:
    """Closes with a TCP reset (RST), as a store dropping a connection does."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive, and '100 Continue' to clients that expect it
    # The headers and the body go in separate sends: with Nagle's algorithm the body waited for
    # the client's delayed ACK, about 40 ms a request, which no store's latency is.
    disable_nagle_algorithm = True
    server: '_ProxyServer'

    def log_message(self, *args):  # quiet: the counts say what happened
        pass

    def _read_body(self) -> bytes:
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            body = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):
                        pass  # trailers
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def _handle(self):
        proxy = self.server.proxy
        url = urllib.parse.urlsplit(self.path)
        kind = proxy.classify(self.command, url.path, url.query, self.headers)
        n = proxy.counts.next_request(kind)
        body = self._read_body()
        fault = proxy.schedule.fault(kind, n)
        if fault:
            proxy.counts.fault(kind, fault)
        if fault in ('500', '503', '429'):
            content_type, error_body = proxy.error_body(int(fault))
            self.send_response(int(fault))
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(error_body)))
            if fault != '500':
                self.send_header('Retry-After', '1')
            self.end_headers()
            self.wfile.write(error_body)
            return
        if fault == 'reset':
            self.close_connection = True
            _reset(self.connection)
            return
        if fault == 'stall':
            time.sleep(proxy.schedule.stall_secs(kind, n))
        time.sleep(proxy.latency_secs)
        status, reason, headers, answer = proxy.forward(self.command, self.path, self.headers, body)
        self.send_response(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        if self.command != 'HEAD':
            self.send_header('Content-Length', str(len(answer)))
        self.end_headers()
        if fault == 'cut':  # the whole length promised, part of it sent
            self.wfile.write(answer[:len(answer) // 2])
            self.wfile.flush()
            self.close_connection = True
            _reset(self.connection)
            return
        if self.command != 'HEAD':
            self.wfile.write(answer)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle


# socketserver listens with a backlog of 5: a sixth client connecting at once had its SYN dropped
# and sent again a second later (TCP's retransmission timeout), as no store's listener does.
LISTEN_BACKLOG = 128


class _ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    proxy: 'FaultProxy'

    def handle_error(self, request, client_address):
        """A client that drops its connection (as curl does after some errors) is no news."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultProxy(ServedInThread):
    """The proxy on 127.0.0.1:port (a free one unless told), forwarding to upstream
    ('http://127.0.0.1:PORT'); store: 's3' or 'gcs' (how requests are classified and errors
    worded); latency_secs: added to every forwarded request, as a store's distance does (requests
    in parallel wait it out together). Use as a context manager; .url is what a client points at
    instead of upstream."""

    def __init__(self, upstream: str, mix: FaultMix = NO_FAULTS, seed: int = 0,
                 store: str = 's3', port: int = 0, latency_secs: float = 0.0):
        parts = urllib.parse.urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
        self.classify, self.error_body = STORES[store]
        self.counts = Counts()
        self.schedule = Schedule(mix, seed)
        self.latency_secs = latency_secs
        self._server = _ProxyServer(('127.0.0.1', port), _Handler)
        self._server.proxy = self
        self.port = self._server.server_address[1]
        self.url = f'http://127.0.0.1:{self.port}'

    def set_mix(self, mix: FaultMix, seed: int = 0) -> None:
        """Changes the schedule from the next request on (counts go on)."""
        self.schedule = Schedule(mix, seed)

    def forward(self, method, target, headers, body):
        """The upstream's answer: (status, reason, headers to pass on, body)."""
        connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                if name.lower() not in NOT_PASSED and name.lower() != 'content-length':
                    connection.putheader(name, value)
            connection.putheader('Content-Length', str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            answer = response.read()
            passed = [(name, value) for name, value in response.getheaders()
                      if name.lower() not in NOT_PASSED
                      and (method == 'HEAD' or name.lower() != 'content-length')]
            return response.status, response.reason, passed, answer
        finally:
            connection.close()


@contextlib.contextmanager
def in_front_of(store: str, server, **proxy_options):
    """A FaultProxy (proxy_options: mix, seed, latency_secs) between this process's children and
    the test server of store: 's3' (tests/s3_server.py's: S3_ENDPOINT in os.environ points at the
    proxy) or 'gs' (tests/gcs_server.py's: its TLS proxy forwards to this one); put back after."""
    if store == 's3':
        with FaultProxy(server.env['S3_ENDPOINT'], **proxy_options) as proxy:
            os.environ['S3_ENDPOINT'] = proxy.url
            try:
                yield proxy
            finally:
                os.environ['S3_ENDPOINT'] = server.env['S3_ENDPOINT']
        return
    with FaultProxy(f'http://127.0.0.1:{server.port}', store='gcs', **proxy_options) as proxy:
        server.proxy.upstream = ('127.0.0.1', proxy.port)
        try:
            yield proxy
        finally:
            server.proxy.upstream = ('127.0.0.1', server.port)
