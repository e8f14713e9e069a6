"""Each evaluation's metrics where Katib and Vertex AI read them: Katib's StdOut line (read back
with Katib's default regex), scalar tensor summaries (read back as Katib's TensorFlowEvent
collector reads them), and cloudml-hypertune's file in a Vertex AI trial."""
import json
import math
import os
import re
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator

from helpers import run_with_env
from trainer.config import reported_metrics
from trainer.evaluation import ledger_reports
from trainer.input_kinds import pair_protocol
from trainer.model_dir import ledger
from trainer.observe import tuner_metrics

# Katib's StdOut collector's default filter (pkg/metricscollector/v1beta1/common/const.go).
KATIB_DEFAULT_REGEX = re.compile(r'([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)')


def katib_reads(line):
    return {name: float(value) for name, value, *_ in KATIB_DEFAULT_REGEX.findall(line)}


def test_katib_line_holds_every_scalar_metric_as_katib_reads_it():
    metrics = {'accuracy': 0.98125, 'loss': 1.5e-05, 'global_step': 400, 'auc': math.nan,
               'lfw_protocol': {'protocol': '10-fold', 'auc_mean': 0.951, 'fold_accuracies': [0.9]},
               'flag': True}
    line = tuner_metrics.katib_line(metrics)
    assert line == 'accuracy=0.98125 global_step=400 lfw_protocol_auc_mean=0.951 loss=1.5e-05'
    assert katib_reads(line) == {'accuracy': 0.98125, 'global_step': 400,
                                 'lfw_protocol_auc_mean': 0.951, 'loss': 1.5e-05}


def tensors_as_katib_reads(eval_dir, metric):
    """[(step, value)] of the tensor summaries Katib's tfevent_loader takes for a metric: every
    tag that starts with its name, read with tf.make_ndarray."""
    found = []
    for name in os.listdir(eval_dir):
        if name.startswith('events.out'):
            events = event_accumulator.EventAccumulator(
                os.path.join(eval_dir, name), size_guidance={event_accumulator.TENSORS: 0})
            events.Reload()
            for tag in events.Tags()[event_accumulator.TENSORS]:
                if tag.startswith(metric):
                    found += [(event.step, float(tf.make_ndarray(event.tensor_proto)))
                              for event in events.Tensors(tag)]
    return found


@pytest.fixture(scope='module')
def trial(digit_shards, tmp_path_factory):
    """train_and_evaluate on one machine as Vertex AI's trial 7: two evaluations."""
    tmp = tmp_path_factory.mktemp('trial')
    metric_file = tmp / 'hypertune' / 'output.metrics'
    result = run_with_env(
        'trainer.main', '--mode=train_and_evaluate', f'--model_dir={tmp}/model',
        f'--train_files={digit_shards.train_pattern}', f'--eval_files={digit_shards.validation_pattern}',
        '--batch_size=16', '--train_steps=4', '--save_checkpoints_steps=2', '--eval_throttle_secs=0',
        '--hypertune_metric=accuracy', '--dropout_rate=0.2',
        env={'CLOUD_ML_TRIAL_ID': '7', 'CLOUD_ML_HP_METRIC_FILE': str(metric_file)})
    assert result.returncode == 0, result.stderr[-3000:]
    ledger_dir = tmp / 'model' / 'eval_default' / 'results'
    entries = [json.loads((ledger_dir / name).read_text()) for name in sorted(os.listdir(ledger_dir))]
    return result, entries, metric_file, tmp


def test_train_and_evaluate_prints_a_katib_line_per_evaluation_into_its_ledger(trial):
    result, entries, _, _ = trial
    assert [entry['step'] for entry in entries] == [2, 4]  # the ledger, as the eval job keeps it
    lines = result.stdout.splitlines()
    assert [katib_reads(line) for line in lines] == [
        {name: pytest.approx(value, rel=1e-5) for name, value in entry['metrics'].items()}
        for entry in entries]
    assert set(katib_reads(lines[0])) == {'accuracy', 'global_step', 'loss'}


def test_metrics_are_tensor_summaries_for_katib_and_drawn_once_in_tensorboard(trial):
    _, entries, _, tmp = trial
    eval_dir = str(tmp / 'model' / 'eval_default')
    for name in ('accuracy', 'loss'):
        assert tensors_as_katib_reads(eval_dir, name) == [
            (entry['step'], pytest.approx(entry['metrics'][name], rel=1e-6)) for entry in entries]
    drawn = plugin_event_accumulator.EventAccumulator(eval_dir)  # as TensorBoard reads the run
    drawn.Reload()
    assert set(drawn.PluginTagToContent('scalars')) == {'accuracy', 'loss'}
    assert [event.step for event in drawn.Tensors('accuracy')] == [2, 4]  # each point once


def test_a_vertex_trial_reports_its_metric_through_hypertune(trial):
    _, entries, metric_file, _ = trial
    reported = [json.loads(line) for line in metric_file.read_text().splitlines()]
    assert [(row['trial'], row['global_step'], float(row['accuracy'])) for row in reported] == [
        ('7', str(entry['step']), pytest.approx(entry['metrics']['accuracy'])) for entry in entries]
    assert all(set(row) == {'timestamp', 'trial', 'accuracy', 'global_step', 'checkpoint_path'}
               for row in reported)


def test_evaluate_keeps_stdout_json_and_puts_the_katib_line_on_stderr(trial, digit_shards):
    _, entries, _, tmp = trial
    result = run_with_env('trainer.main', '--mode=evaluate', f'--model_dir={tmp}/model',
                          f'--eval_files={digit_shards.validation_pattern}', '--eval_name=again',
                          '--batch_size=16')
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout)
    [line] = [line for line in result.stderr.splitlines() if line.startswith('accuracy=')]
    assert katib_reads(line) == {name: pytest.approx(value, rel=1e-5)
                                 for name, value in metrics.items()}
    # evaluate builds the model as trained: the trial's --dropout_rate from flags.txt
    assert '--dropout_rate=0.2' in (tmp / 'model' / 'flags.txt').read_text().splitlines()


def test_a_trials_chief_reports_the_ledger_its_evaluator_wrote(tmp_path):
    """After --wait_for_eval_secs, the chief of a cluster reports each evaluation in the ledger."""
    eval_ledger = ledger.Ledger(str(tmp_path), 'default')
    reported = []
    job = types.SimpleNamespace(ledger=eval_ledger, report=lambda entry, where: reported.append(
        (entry.step, where)))
    ledger_reports.report_ledger(job)
    assert reported == []  # nothing evaluated: nothing to report
    for step, accuracy in [(0, 0.5), (4, 0.75)]:
        eval_ledger.append(step, f'model.ckpt-{step}', ledger.EVALUATED, eval_files='data/*',
                           metrics={'accuracy': accuracy})
    ledger_reports.report_ledger(job)
    assert reported == [(0, None), (4, None)]  # no eval folder: the evaluator wrote the summaries


def test_the_metrics_an_objective_may_name_are_those_an_evaluation_reports(trial):
    _, entries, _, _ = trial
    reported = set(tuner_metrics.scalar_metrics(entries[-1]['metrics'])) - {'global_step'}
    assert reported == set(reported_metrics.objective_metrics('mnist_cnn'))
    # LFW's protocol: both forms of its report, flattened, are among the face kinds' names
    scores, labels = np.array([0.9, 0.2, 0.7, 0.4]), np.array([1, 0, 1, 0])
    declared = set(reported_metrics.objective_metrics('face_embedding'))
    for report in (pair_protocol.evaluate(scores, labels, np.array([0, 0, 1, 1])),
                   pair_protocol.evaluate(scores, labels, np.zeros(4), scores, labels)):
        assert set(tuner_metrics.scalar_metrics({'lfw_protocol': report})) <= declared
