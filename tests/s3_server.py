"""An S3-compatible server on 127.0.0.1 for the tests: moto's standalone server (moto[server])."""
import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
import types
import uuid

ENV_KEYS = ('S3_ENDPOINT', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION',
            'S3_VERIFY_SSL', 'AWS_EC2_METADATA_DISABLED')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _request(port, method, path):
    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def s3_env(port) -> dict:
    """What a process needs to use the server through tensorflow-io (no credentials checked)."""
    return {'S3_ENDPOINT': f'http://127.0.0.1:{port}', 'AWS_ACCESS_KEY_ID': 'testing',
            'AWS_SECRET_ACCESS_KEY': 'testing', 'AWS_REGION': 'us-east-1', 'S3_VERIFY_SSL': '0',
            'AWS_EC2_METADATA_DISABLED': 'true'}


@contextlib.contextmanager
def running_server(log_path):
    """Starts the server on a free loopback port, sets the S3 variables in os.environ (so child
    processes inherit them), yields an object with .port, .env and .make_bucket(); stops it after."""
    port = free_port()
    with open(log_path, 'w') as log:
        process = subprocess.Popen([sys.executable, '-m', 'moto.server', '-H', '127.0.0.1',
                                    '-p', str(port)], stdout=log, stderr=subprocess.STDOUT)
    saved = {key: os.environ.get(key) for key in ENV_KEYS}
    try:
        deadline = time.time() + 60
        while True:
            try:
                _request(port, 'GET', '/')
                break
            except OSError:
                if process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f'moto server did not start:\n{open(log_path).read()}')
                time.sleep(0.1)

        def make_bucket(prefix='bucket'):
            name = f'{prefix}-{uuid.uuid4().hex[:8]}'
            status = _request(port, 'PUT', f'/{name}')
            assert status == 200, f'creating bucket {name}: HTTP {status}'
            return name

        env = s3_env(port)
        os.environ.update(env)
        yield types.SimpleNamespace(port=port, env=env, make_bucket=make_bucket)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
