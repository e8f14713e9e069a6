"""The GCS test fixture's proxy (tests/gcs_server.py), by what a client sees through it: only
Google's hosts, TF's upload requests as fake-gcs-server needs them, GCS's answer to an upload
status query, and an upstream's failures passed on rather than hidden."""
import http.client
import json
import socket
import ssl
import threading

import pytest

from tests.gcs_server import GoogleProxy, make_test_ca


def through(proxy_url, ca, host='www.googleapis.com'):
    """An HTTPS connection to host through the proxy, trusting only the test CA."""
    port = int(proxy_url.rsplit(':', 1)[1])
    connection = http.client.HTTPSConnection('127.0.0.1', port, timeout=10,
                                             context=ssl.create_default_context(cafile=ca))
    connection.set_tunnel(host, 443)
    return connection


def call(connection, method, path, body=b'', headers=None):
    connection.request(method, path, body, headers or {})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def test_tunnels_only_to_google_hosts(gcs_server):
    with pytest.raises(OSError, match='403'):
        call(through(gcs_server.proxy.url, gcs_server.ca, host='example.com'), 'GET', '/')


def test_upload_as_tf_sends_it_and_status_as_gcs_answers(gcs_server):
    bucket = gcs_server.make_bucket()
    connection = through(gcs_server.proxy.url, gcs_server.ca)
    # TF's POST that starts a resumable upload: Go's server answers 501 to this header itself.
    status, headers, _ = call(connection, 'POST', f'/upload/storage/v1/b/{bucket}/o?'
                              'uploadType=resumable&name=x', headers={
                                  'Transfer-Encoding': 'identity', 'Content-Length': '0',
                                  'X-Upload-Content-Length': '5'})
    assert status == 200
    session = headers['Location']
    assert session.startswith('https://www.googleapis.com/upload/')  # back through the proxy
    session_path = session[len('https://www.googleapis.com'):]
    status_query = {'Content-Range': 'bytes */5', 'Content-Length': '0'}
    assert call(connection, 'PUT', session_path, headers=status_query)[0] == 308  # nothing kept
    status, _, answer = call(connection, 'PUT', session_path, b'hello',
                             {'Content-Range': 'bytes 0-4/5'})
    assert status == 200 and json.loads(answer)['size'] == '5'
    status, _, answer = call(connection, 'PUT', session_path, headers=status_query)
    assert status == 200 and json.loads(answer)['size'] == '5'  # finished: as GCS says it
    assert call(connection, 'GET', f'/storage/v1/b/{bucket}/o/x?alt=media')[2] == b'hello'


def serve_once(answer: bytes):
    """A plain-HTTP upstream on 127.0.0.1 that reads one request, sends answer and closes."""
    listener = socket.create_server(('127.0.0.1', 0))

    def serve():
        with listener:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()


@pytest.fixture
def certificates(tmp_path):
    return make_test_ca(str(tmp_path))


def test_a_body_cut_short_upstream_reaches_the_client_cut_short(certificates):
    upstream = serve_once(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n' + b'x' * 10)
    with GoogleProxy(upstream, certificates.chain, certificates.key) as proxy:
        connection = through(proxy.url, certificates.ca)
        connection.request('GET', '/storage/v1/b/bucket/o/x?alt=media')
        response = connection.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as raised:
            response.read()
        assert raised.value.partial == b'x' * 10


@pytest.mark.parametrize('upstream_answer', [b'', None], ids=['closed unanswered', 'refused'])
def test_an_upstream_failure_resets_the_client(certificates, upstream_answer):
    if upstream_answer is None:
        with socket.create_server(('127.0.0.1', 0)) as closed:
            upstream = closed.getsockname()  # nothing listens there once closed
    else:
        upstream = serve_once(upstream_answer)
    with GoogleProxy(upstream, certificates.chain, certificates.key) as proxy:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError, ssl.SSLError)):
            call(through(proxy.url, certificates.ca), 'GET', '/storage/v1/b/bucket/o')
        assert proxy.requests == {'GET': 1}
