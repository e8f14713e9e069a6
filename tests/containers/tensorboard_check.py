"""`./run.sh test-container` scenario e: TensorBoard in the image.

The image trains a tiny run into a folder mounted from the host (no network), then
`tensorboard --logdir=...` starts from the image in a second container with its port published
on the host's loopback; the check waits for the run's scalars through TensorBoard's HTTP API
and draws the Scalars dashboard with headless Chromium (tools/screenshots.py), as
`./run.sh screenshots` does against a TensorBoard on this machine.
"""
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from tests.containers.tfjob_operator import docker
from tools import screenshots

TENSORBOARD_PORT = 6006
TRAIN_STEPS = 40
STARTUP_SECS = 120


def scalar_tags(url: str) -> dict:
    """{run: [tag, ...]} that TensorBoard at url serves; {} while it does not answer yet."""
    try:
        with urllib.request.urlopen(url + 'data/plugin/scalars/tags', timeout=10) as response:
            return {run: sorted(tags) for run, tags in json.loads(response.read()).items()}
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return {}


def container_log(name: str, lines: int = 5) -> str:
    result = subprocess.run(['docker', 'logs', '--tail', str(lines), name], capture_output=True,
                            text=True)
    return (result.stdout + result.stderr).strip()


def train_tiny_run(image: str, runs: str, write_shards) -> str:
    """The image's trainer, 40 steps on tiny shards, into RUNS/model (mounted at /runs)."""
    os.makedirs(runs)
    write_shards(os.path.join(runs, 'data'))
    os.chmod(runs, 0o777)  # the image runs as uid 1000
    docker('run', '--rm', '--network=none', '-v', f'{runs}:/runs', image, '--mode=train',
           '--model_dir=/runs/model', '--train_files=/runs/data/train-*',
           f'--train_steps={TRAIN_STEPS}', '--batch_size=16', '--log_every_n_steps=10')
    return os.path.join(runs, 'model')


def run(check, image: str, work: str, write_shards, say) -> None:
    """Checks that `tensorboard` starts from the image and serves the run's scalars; saves
    WORK/tensorboard/tensorboard_scalars.png."""
    started_at = time.time()
    runs = os.path.join(work, 'tensorboard')
    train_tiny_run(image, runs, write_shards)
    name = f'tensorboard-check-{os.getpid()}'
    docker('run', '-d', '--name', name, '-v', f'{runs}:/runs:ro',
           '-p', f'127.0.0.1::{TENSORBOARD_PORT}', '--entrypoint', 'tensorboard', image,
           '--logdir=/runs/model', '--bind_all', f'--port={TENSORBOARD_PORT}')
    try:
        port = docker('port', name, str(TENSORBOARD_PORT)).split(':')[-1].strip()
        url = f'http://127.0.0.1:{port}/'
        started, tags = time.time(), {}
        while time.time() - started < STARTUP_SECS and 'loss' not in tags.get('.', []):
            if docker('inspect', '--format', '{{.State.Running}}', name).strip() != 'true':
                break
            time.sleep(1)
            tags = scalar_tags(url)
        say(f'  tensorboard in {image} at {url}: scalars {json.dumps(tags)} after '
            f'{time.time() - started:.0f} s')
        check('tensorboard --logdir starts in the image and serves the training loss',
              'loss' in tags.get('.', []), f'runs {sorted(tags)}' if tags else container_log(name))
        chromium = shutil.which('chromium') or shutil.which('chromium-browser')
        check('headless Chromium is installed for the screenshot', bool(chromium),
              'apt-get install chromium')
        if chromium and tags:
            path = os.path.join(runs, 'tensorboard_scalars.png')
            screenshots.screenshot(chromium, screenshots.dashboard_url(url, 'scalars'), path,
                                   '1280,900', 8000)
            size = os.path.getsize(path) if os.path.exists(path) else 0
            check('Chromium drew the Scalars dashboard from the container', size > 10_000,
                  f'{path}, {size} bytes')
    finally:
        docker('rm', '-f', name, check=False)
    say(f'scenario (e) tensorboard in the image: {"FAILED" if check.failed else "PASSED"} in '
        f'{time.time() - started_at:.1f} s')
