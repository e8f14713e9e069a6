"""The training lease and the eval jobs' claims on s3:// and gs:// by the stores' conditional
writes (common/conditional_objects.py): of two racers exactly one wins, however late the
other's write lands; a store that refuses or ignores them is one line; a 503 is tried again."""
import logging
import os

import pytest

from common import conditional_objects
from common.errors import UserError
from pid_namespace import unavailable_reason
from tests import lease_race
from tests.store_faults import FaultProxy
from trainer.model_dir import train_lock


def _race(request, tmp_path, trials):
    if unavailable_reason():
        pytest.skip(unavailable_reason())  # two host names: a UTS namespace each, as root
    servers = {store: request.getfixturevalue(f'{store}_server') for store in ('s3', 'gcs')}
    counts = lease_race.race(servers, str(tmp_path), trials)
    print(f'\ntrials by winners: {counts}')
    one_each = {'lease': {1: trials}, 'claim': {1: trials}}
    assert counts == {'s3': one_each, 'gcs': one_each}


def test_of_two_trainers_and_two_eval_jobs_racing_exactly_one_wins_20_of_20(request, tmp_path):
    """On S3 and GCS at once, the 20 trials side by side (as long as one). One racer's writes
    land 8 s late, past the other's 2 s settle window (tests/lease_race.py); before conditional
    writes both won 16 to 20 of 20 trials of each kind on each store."""
    _race(request, tmp_path, trials=20)


NOT_IMPLEMENTED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code>'
                   b'<Message>A header you provided implies functionality that is not '
                   b'implemented</Message><Condition>If-None-Match</Condition></Error>')
CONDITIONS = ('if-none-match', 'if-match')


class _Store(FaultProxy):
    """moto behind a proxy that answers PutObject's conditions as a store without them does:
    'refuses' (501 NotImplemented, as MinIO and AWS answer a header they do not implement), or
    'ignores' (drops them: the last writer wins); 'slow-down': 503 to the first PUTs."""

    def __init__(self, upstream, behaviour, slow_downs=0):
        super().__init__(upstream)
        self.behaviour, self.slow_downs, self.puts = behaviour, slow_downs, 0

    def forward(self, method, target, headers, body):
        if method == 'PUT':
            self.puts += 1
            if self.puts <= self.slow_downs:
                return 503, 'Slow Down', [('Content-Type', 'application/xml')], (
                    b'<Error><Code>SlowDown</Code><Message>Please reduce your request rate.'
                    b'</Message></Error>')
            if self.behaviour == 'refuses' and any(name in CONDITIONS for name in
                                                   map(str.lower, headers.keys())):
                return 501, 'Not Implemented', [('Content-Type', 'application/xml')], (
                    NOT_IMPLEMENTED)
            if self.behaviour == 'ignores':
                for name in CONDITIONS:
                    del headers[name]
        return super().forward(method, target, headers, body)


@pytest.fixture
def store_before(s3_server, monkeypatch):
    """A fresh bucket reached through a _Store: (bucket, proxy_for(behaviour, slow_downs))."""
    bucket = 's3://' + s3_server.make_bucket()
    proxies = []

    def proxy_for(behaviour, slow_downs=0):
        proxy = _Store(s3_server.env['S3_ENDPOINT'], behaviour, slow_downs).__enter__()
        proxies.append(proxy)
        monkeypatch.setenv('S3_ENDPOINT', proxy.url)  # for_path: a client for this endpoint
        return proxy

    yield bucket, proxy_for
    for proxy in proxies:
        proxy.__exit__(None, None, None)


@pytest.mark.parametrize('behaviour, what', [
    ('refuses', 'PutObject If-None-Match: * answered 501 NotImplemented: A header you provided '
                'implies functionality that is not implemented'),
    ('ignores', 'a second create of the object with If-None-Match: * went through')])
def test_a_store_without_conditional_writes_is_one_line_at_the_first_write(store_before,
                                                                          behaviour, what):
    bucket, proxy_for = store_before
    proxy_for(behaviour)
    model_dir = f'{bucket}/model'
    with pytest.raises(UserError) as raised:
        with train_lock.TrainLock(model_dir):
            pytest.fail('the lease was taken')
    assert str(raised.value) == (
        f'{model_dir}/train.lease: {bucket} does not do conditional writes ({what}); the '
        "training lease and the eval jobs' claims need them to give a model_dir to one trainer "
        'and a checkpoint to one eval job: use a store that has them (AWS S3, GCS) or a local '
        '--model_dir')


def test_a_503_is_tried_again_not_taken_for_a_lost_race(store_before, monkeypatch, caplog):
    """botocore tries a PUT 3 times (AWS_MAX_ATTEMPTS), then common.store_retries again."""
    bucket, proxy_for = store_before
    monkeypatch.setattr('common.store_retries.STORE_BACKOFF_SECS', 0.1)
    proxy = proxy_for('enforces', slow_downs=int(os.environ.get('AWS_MAX_ATTEMPTS', '3')))
    held = train_lock.Lease(f'{bucket}/model')
    with caplog.at_level(logging.WARNING):
        held.acquire()
    assert held.read().token == held.token
    held.release()
    assert held.read() is None
    [line] = [r.getMessage() for r in caplog.records if 'trying again' in r.getMessage()]
    assert line.startswith(f'creating {bucket}/model/train.lease failed (TransientStoreFailure: '
                           'PutObject If-None-Match: *: 503 SlowDown: Please reduce your request '
                           'rate.); trying again in ')
    assert proxy.puts >= 3 + 2  # the 503s, the create, the check that a second create fails


def test_a_local_or_ram_path_has_no_conditional_objects(tmp_path):
    """The OS lock stays for local paths; ram:// settles and reads back."""
    assert conditional_objects.for_path(str(tmp_path / 'model')) is None
    assert conditional_objects.for_path(f'ram://{tmp_path}/model') is None
    assert conditional_objects.for_path('s3://bucket/model') is not None
