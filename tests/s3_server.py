"""An S3-compatible server on 127.0.0.1 for the tests: moto's standalone server (moto[server]).
`./run.sh test-container` starts it on a private docker network's gateway instead."""
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


def free_port(host='127.0.0.1') -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _request(host, port, method, path):
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def s3_env(port, host='127.0.0.1') -> dict:
    """What a process needs to use the server through tensorflow-io (no credentials checked)."""
    return {'S3_ENDPOINT': f'http://{host}:{port}', 'AWS_ACCESS_KEY_ID': 'testing',
            'AWS_SECRET_ACCESS_KEY': 'testing', 'AWS_REGION': 'us-east-1', 'S3_VERIFY_SSL': '0',
            'AWS_EC2_METADATA_DISABLED': 'true'}


@contextlib.contextmanager
def running_server(log_path, set_environ=True, checks_credentials_after=None, host='127.0.0.1'):
    """Starts the server on a free port of host (loopback unless told), sets the S3 variables in
    os.environ (so child processes inherit them), yields an object with .port, .env and
    .make_bucket(); stops it after.

    checks_credentials_after=N: the server accepts N requests, then only known credentials
    (none are: every later request is refused as with wrong keys).
    """
    port = free_port(host)
    server_env = dict(os.environ)
    if checks_credentials_after is not None:
        # + 1: the request below that waits for the server to answer
        server_env['INITIAL_NO_AUTH_ACTION_COUNT'] = str(checks_credentials_after + 1)
    with open(log_path, 'w') as log:
        process = subprocess.Popen([sys.executable, '-m', 'moto.server', '-H', host,
                                    '-p', str(port)], stdout=log, stderr=subprocess.STDOUT,
                                   env=server_env)
    saved = {key: os.environ.get(key) for key in ENV_KEYS}
    try:
        deadline = time.time() + 60
        while True:
            try:
                _request(host, port, 'HEAD', '/')
                break
            except OSError:
                if process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f'moto server did not start:\n{open(log_path).read()}')
                time.sleep(0.1)

        env = s3_env(port, host)

        def make_bucket(prefix='bucket'):
            import boto3  # moto's own dependency: a signed request, as a real client sends
            name = f'{prefix}-{uuid.uuid4().hex[:8]}'
            boto3.client('s3', endpoint_url=env['S3_ENDPOINT'], region_name=env['AWS_REGION'],
                         aws_access_key_id=env['AWS_ACCESS_KEY_ID'],
                         aws_secret_access_key=env['AWS_SECRET_ACCESS_KEY']).create_bucket(Bucket=name)
            return name

        if set_environ:
            os.environ.update(env)
        yield types.SimpleNamespace(port=port, env=env, make_bucket=make_bucket)
    finally:
        stop_server(process, saved)


def stop_server(process, saved_environ):
    """Puts back the variables saved before a server's were set (None: unset), then stops it."""
    for key, value in saved_environ.items():
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
