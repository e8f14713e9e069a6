"""`./run.sh test-container`: the image, and the TFJob that `trainer.deploy` prints, run
as containers the way the training operator runs them (tests/containers/tfjob_operator.py).

  ./run.sh test-container [--scenarios=a,b,c,d,e] [--python_image=IMAGE]

Builds the image (PYTHON_IMAGE from the environment, else local/python:3.11-bookworm, which
../shared/tools/container-env.sh makes), starts the tests' S3 server (moto) on the gateway of a
private docker network (--internal: the replicas reach each other and the server, nothing
else), writes tiny synthetic digit shards into a bucket, and runs the TFJob printed for
`--workers=1 --ps=1 --evaluator --env_from_secret=s3-credentials` in each scenario:

  a  the job succeeds: the final checkpoint is in the eval ledger, the best export is complete
  b  the chief gets SIGTERM at a quarter of training (SIGKILL after the grace period if it still
     runs), is created again and resumes from the step it reached; the job ends as in a
  c  a trainer flag is misspelt: every replica exits 2, the job fails once, nothing restarts
  d  the worker is killed -9 at a quarter of training, is created again, training completes
  e  `tensorboard --logdir=...` from the image serves a run's scalars on a published port, and
     headless Chromium draws its Scalars dashboard (tests/containers/tensorboard_check.py)

Each check prints ok or FAILED; each scenario its wall time. Exit status 1 if any check failed.
Needs a docker daemon (root); not part of `./run.sh test`.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import yaml
from absl import flags

from common import cli, files
from input_fns.prepare import command as prepare
from tests.helpers import REPO, make_digit_arrays
from tests.containers import tensorboard_check
from tests.containers.tfjob_operator import TFJobRun, docker
from tests.s3_server import running_server
from trainer.model_dir import checkpoints, ledger

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_list('scenarios', list(SCENARIOS), 'Which scenarios to run.')
    flags.DEFINE_string('python_image', os.environ.get('PYTHON_IMAGE',
                                                       'local/python:3.11-bookworm'),
                        'The base image to build on (PYTHON_IMAGE).')


IMAGE = 'estimator-trainer:test-container'
SECRET = 's3-credentials'
TRAIN_STEPS = 600
CHECKPOINT_STEPS = 400
# b, d: when the chief has logged a quarter of the steps, some 250 steps before the periodic
# checkpoint at 400: a chief resuming past the step it logged has saved on SIGTERM.
DISRUPT_AT = 0.25
EVAL_NAME = 'validation'
JOB_TIMEOUT_SECS = 600
STEP_LOGGED = re.compile(r'step ([\d,]+)/[\d,]+ \(')
RESTORED = re.compile(r'Restoring parameters from \S*model\.ckpt-(\d+)')
SCENARIOS = {
    'a': 'the job succeeds, evaluates its final checkpoint and exports',
    'b': 'the chief is stopped (SIGTERM, SIGKILL after the grace period) mid-training',
    'c': 'a misspelt trainer flag fails the job once',
    'd': 'the worker is killed -9 mid-training',
    'e': 'tensorboard in the image serves the scalars',
}


STARTED = time.time()


def say(line: str):
    print(f'[{time.time() - STARTED:7.1f}s] {line}', flush=True)


class Checks:
    """Named checks of one scenario: each printed ok or FAILED, none stops the others."""

    def __init__(self):
        self.failed = []

    def __call__(self, name: str, passed: bool, detail=''):
        say(f'  {"ok" if passed else "FAILED"}: {name}' + (f' ({detail})' if detail else ''))
        if not passed:
            self.failed.append(name)


def build_image(base: str):
    log = os.path.join(tempfile.gettempdir(), 'test-container-build.log')
    start = time.time()
    with open(log, 'w') as out:
        result = subprocess.run(['docker', 'build', '--build-arg', f'PYTHON_IMAGE={base}',
                                 '-t', IMAGE, '.'], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise RuntimeError(f'docker build on {base} failed; see {log}')
    size = int(docker('image', 'inspect', '--format', '{{.Size}}', IMAGE))
    say(f'built {IMAGE} on {base} in {time.time() - start:.0f} s: {size / 1e9:.2f} GB')


def trainer_knows(flag: str) -> bool:
    return f'--{flag}' in docker('run', '--rm', IMAGE, '--helpfull', check=False)


def write_shards(data_dir: str):
    """Tiny synthetic digits (the tests' make_digit_arrays): 230 training, 47 validation."""
    prepare.write_digit_splits(data_dir, 'test_digits', {
        'train': (*make_digit_arrays(230, seed=1), ['synthetic']),
        'validation': (*make_digit_arrays(47, seed=2), ['synthetic']),
    }, num_shards=4, num_eval_shards=2, seed=0)


def print_tfjob(name, root, data, server_env, wait_for_eval, *extra_trainer_flags) -> dict:
    """The TFJob `trainer.deploy` prints, run as a user runs it."""
    env_flags = [f'--env={key}={server_env[key]}' for key in
                 ('S3_ENDPOINT', 'AWS_REGION', 'S3_VERIFY_SSL', 'AWS_EC2_METADATA_DISABLED')]
    command = [sys.executable, '-m', 'trainer.deploy', 'tfjob', f'--name={name}',
               f'--image={IMAGE}', '--workers=1', '--ps=1', '--evaluator',
               f'--env_from_secret={SECRET}', *env_flags,
               *([] if wait_for_eval else ['--wait_for_eval_secs=0']), '--',
               f'--model_dir={root}/model', f'--train_files={data}/train-*',
               f'--eval_files={data}/validation-*', f'--eval_name={EVAL_NAME}',
               f'--export_dir={root}/exports', f'--train_steps={TRAIN_STEPS}',
               '--batch_size=16', f'--save_checkpoints_steps={CHECKPOINT_STEPS}',
               '--log_every_n_steps=10', *extra_trainer_flags]
    printed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    return yaml.safe_load(printed.stdout)


def last_step_logged(log: str) -> int:
    steps = STEP_LOGGED.findall(log)
    return int(steps[-1].replace(',', '')) if steps else -1


def check_trained_evaluated_exported(check: Checks, root: str):
    model_dir = f'{root}/model'
    saved = checkpoints.list_checkpoints(model_dir)
    final = saved[-1][0] if saved else -1
    check(f'final checkpoint at step >= {TRAIN_STEPS}', final >= TRAIN_STEPS, f'step {final}')
    entries = {entry.step: entry for entry in ledger.Ledger(model_dir, EVAL_NAME).entries()}
    check('the eval ledger has the final checkpoint, evaluated',
          final >= TRAIN_STEPS and final in entries and entries[final].status == ledger.EVALUATED,
          f'ledger steps {sorted(entries)}')
    exports = f'{root}/exports'
    best = files.read_text(f'{exports}/best').strip() if files.exists(f'{exports}/best') else ''
    check('the best export is complete', bool(best) and all(
        files.exists(f'{exports}/{best}/{name}')
        for name in ('saved_model.pb', 'export_complete.json')), f'best: {best or "none"}')


def when_chief_passes(fraction: float, disrupt):
    """A watch that calls disrupt(run) once, when the chief has logged fraction of the steps."""
    done = []

    def watch(run: TFJobRun):
        chief = run.replica('chief')
        if not done and chief.running and chief.attempts == 1:
            step = last_step_logged(run.logs(chief))
            if step >= fraction * TRAIN_STEPS:
                done.append(step)
                say(f'chief logged step {step}')
                disrupt(run)
    return watch, done


def scenario_run(letter, server, bucket, data, network, log_dir, wait_for_eval) -> Checks:
    check = Checks()
    root = f's3://{bucket}/{letter}'
    extra = ['--train_step=100'] if letter == 'c' else []  # c: the misspelt --train_steps
    tfjob = print_tfjob(f'digits-{letter}', root, data, server.env, wait_for_eval, *extra)
    secrets = {SECRET: {key: server.env[key]
                        for key in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY')}}
    run = TFJobRun(tfjob, secrets, network, log_dir, lambda line: say(f'  {line}'))
    watch, disrupted = (lambda run: None), []
    if letter == 'b':
        watch, disrupted = when_chief_passes(DISRUPT_AT,
                                             lambda run: run.stop_pod(run.replica('chief')))
    if letter == 'd':
        watch, disrupted = when_chief_passes(
            DISRUPT_AT, lambda run: run.stop_pod(run.replica('worker'), 'KILL'))
    started = time.time()
    run.run(JOB_TIMEOUT_SECS, watch)
    wall = time.time() - started
    codes = {r.pod_name: r.exit_codes for r in run.replicas}
    say(f'  exit codes by pod: {json.dumps(codes)}')
    if letter == 'c':
        check('the job failed', run.state == 'Failed', run.reason)
        check('it failed on exit 2', 'exited 2' in run.reason, run.reason)
        check('no pod was created again', run.recreated == 0, f'{run.recreated} re-created')
    else:
        check('the job succeeded (the chief exited 0)', run.state == 'Succeeded', run.reason)
        check_trained_evaluated_exported(check, root)
    if letter in ('b', 'd'):
        check('the disruption happened mid-training', bool(disrupted) and
              disrupted[0] < TRAIN_STEPS, f'at step {disrupted[0] if disrupted else None}')
    if letter == 'b':
        chief = run.replica('chief')
        first = chief.exit_codes[0] if chief.exit_codes else None
        took = chief.exit_times[0] - chief.sigterm_at if chief.exit_codes else None
        check('the chief exited 143 on SIGTERM (not SIGKILL\'s 137)', first == 143,
              f'exit {first}, {took:.1f} s after SIGTERM' if took is not None else 'no exit')
        restored = [int(step) for step in RESTORED.findall(
            open(os.path.join(log_dir, f'{chief.pod_name}.2.log')).read())] if len(
            chief.exit_codes) > 1 else []
        reached = disrupted[0] if disrupted else -1
        check('the restarted chief resumed at or past the step the first one had logged',
              bool(restored) and restored[0] >= reached,
              f'logged step {reached} before SIGTERM, resumed from {restored[:1]}')
    if letter == 'd':
        worker = run.replica('worker')
        check('the worker was killed (137) and created again',
              worker.exit_codes[:1] == [137] and len(worker.exit_codes) >= 2,
              f'exit codes {worker.exit_codes}')
    say(f'scenario ({letter}) {SCENARIOS[letter]}: '
        f'{"PASSED" if not check.failed else "FAILED"} in {wall:.1f} s')
    return check


def main(argv):
    del argv
    if not set(FLAGS.scenarios) <= set(SCENARIOS):
        raise ValueError(f'--scenarios={",".join(FLAGS.scenarios)}: use some of '
                         f'{",".join(SCENARIOS)}')
    if subprocess.run(['docker', 'info'], capture_output=True).returncode != 0:
        raise ValueError('test-container needs a running docker daemon: as root, run '
                         '../shared/tools/container-env.sh')
    build_image(FLAGS.python_image)
    wait_for_eval = trainer_knows('wait_for_eval_secs')
    if not wait_for_eval:
        say('this trainer has no --wait_for_eval_secs (issue 25 item 3): deployed with '
            '--wait_for_eval_secs=0, so the chief does not wait for the evaluator')
    network = f'tfjob-test-{uuid.uuid4().hex[:8]}'
    docker('network', 'create', '--internal', network)
    failed = []
    try:
        gateway = docker('network', 'inspect', '--format',
                         '{{(index .IPAM.Config 0).Gateway}}', network).strip()
        work = tempfile.mkdtemp(prefix='test-container-')
        with running_server(os.path.join(work, 'moto.log'), host=gateway) as server:
            bucket = server.make_bucket('tfjob')
            data = f's3://{bucket}/data'
            write_shards(data)
            say(f'network {network} (gateway {gateway}), S3 server {server.env["S3_ENDPOINT"]}, '
                f'shards in {data}, logs in {work}')
            for letter in FLAGS.scenarios:
                say(f'scenario ({letter}) {SCENARIOS[letter]}')
                log_dir = os.path.join(work, letter)
                os.makedirs(log_dir)
                if letter == 'e':
                    check = Checks()
                    tensorboard_check.run(check, IMAGE, log_dir, write_shards, say)
                else:
                    check = scenario_run(letter, server, bucket, data, network, log_dir,
                                         wait_for_eval)
                if check.failed:
                    failed.append(letter)
    finally:
        docker('network', 'rm', network, check=False)
    say('all scenarios passed' if not failed else f'failed: {", ".join(failed)}')
    return 1 if failed else 0


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[], user_errors=(ValueError,))
