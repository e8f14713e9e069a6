"""The status report: a pure function from what a model_dir holds to a dict, shown as text."""
import json
from dataclasses import replace

from helpers import evaluated, skipped
from trainer.model_dir.ledger import Evaluator
from trainer.model_dir.run_files import TrainFinished
from trainer.observe import status


def entry(step, **metrics):
    return evaluated(step, global_step=step, **metrics)


def snapshot(**overrides):
    values = dict(
        model_dir='runs/m', flags={'model': 'mnist_cnn', 'train_steps': '400', 'batch_size': '16'},
        checkpoints=[200, 300, 400], latest_checkpoint_age_secs=None,
        train_finished=TrainFinished(step=400, train_steps=400, early_stopped=False,
                                     reason='reached train_steps'),
        eval_ledgers={'validation': [entry(100, loss=0.5, accuracy=0.8),
                                     skipped(200),
                                     entry(300, loss=0.3, accuracy=0.85)]},
        exports={'exports/m': {'steps': [100, 300], 'pointers': {'best': 300}, 'served': 300}})
    values.update(overrides)
    return status.Snapshot(**values)


def test_finished_run_with_an_eval_job_and_exports():
    report = status.summarize(snapshot())
    assert report['model'] == 'mnist_cnn'
    assert report['training'] == {'latest_step': 400, 'train_steps': 400, 'percent': 100.0,
                                  'state': 'finished', 'final_step': 400,
                                  'reason': 'reached train_steps'}
    [job] = report['eval_jobs']
    assert job['evaluated'] == [100, 300] and job['skipped'] == [200] and job['waiting'] == [400]
    assert job['latest'] == {'step': 300, 'metrics': {'accuracy': 0.85, 'loss': 0.3}}
    assert job['best'] == {'accuracy': {'step': 300, 'value': 0.85, 'mode': 'max'},
                           'loss': {'step': 300, 'value': 0.3, 'mode': 'min'}}
    assert report['exports'] == [{'export_dir': 'exports/m', 'steps': [100, 300],
                                  'pointers': {'best': 300}, 'served': 300}]
    json.dumps(report)  # --format=json prints exactly this
    text = status.render_text(report).splitlines()
    assert 'training    step 400/400 (100%), finished: reached train_steps' in text
    assert ('eval_validation  on data/validation-*: 2 evaluated, 1 skipped (200), '
            '1 waiting (400)') in text
    assert '    best    accuracy 0.85 (step 300), loss 0.3 (step 300)' in text
    assert 'exports     exports/m: 100, 300; best -> 300; models.config serves 300' in text


def test_text_shows_the_flags_the_run_set_and_json_every_flag():
    recorded = {'model': 'mnist_cnn', 'train_steps': '400', 'batch_size': '100',
                'augment': 'true', 'same_fraction': '0.5', 'xla': 'false', 'gone_flag': '3'}
    report = status.summarize(snapshot(flags=recorded))
    assert report['flags'] == recorded
    lines = status.render_text(report).splitlines()
    assert 'flags set   --augment=true --gone_flag=3 --train_steps=400' in lines


def test_a_flag_longer_than_a_line_is_shown_whole():
    params = 'tower_filters=[32,64,128,128,256],learning_rate_schedule=cosine,warmup_steps=200'
    report = status.summarize(snapshot(flags={'model': 'face_embedding', 'augment': 'true',
                                              'model_params': params, 'train_steps': '4000'}))
    lines = status.render_text(report).splitlines()
    assert f'            --model_params={params}' in lines
    assert 'flags set   --augment=true' in lines


def test_best_is_per_metric_direction():
    ledgers = {'v': [entry(100, loss=0.2, accuracy=0.7), entry(200, loss=0.4, accuracy=0.9)]}
    best = status.summarize(snapshot(eval_ledgers=ledgers))['eval_jobs'][0]['best']
    assert best['loss']['step'] == 100 and best['accuracy']['step'] == 200


def test_per_class_metrics_show_as_their_lowest_in_text_and_each_in_json():
    per_class = {'accuracy_of_class/cat': 0.9, 'accuracy_of_class/dog': 0.75}
    report = status.summarize(snapshot(eval_ledgers={'v': [entry(100, loss=0.2, **per_class)]}))
    assert report['eval_jobs'][0]['latest']['metrics'] == {'loss': 0.2, **per_class}
    text = status.render_text(report).splitlines()
    assert ('    latest  step 100: loss 0.2, accuracy_of_class: lowest 0.75 (dog) of 2') in text
    canned = {'label/mean': 0.328, 'prediction/mean': 0.345}  # the canned binary head's
    report = status.summarize(snapshot(eval_ledgers={'v': [entry(100, loss=0.2, **canned)]}))
    assert ('    latest  step 100: label/mean 0.328, loss 0.2, prediction/mean 0.345'
            in status.render_text(report).splitlines())
    assert '    best    loss 0.2 (step 100)' in text


def test_early_stopped_and_unfinished_runs():
    stopped = status.summarize(snapshot(train_finished=TrainFinished(
        step=300, train_steps=400, early_stopped=True, reason='loss has not improved')))
    assert stopped['training']['state'] == 'stopped early'
    assert 'stopped early: loss has not improved' in status.render_text(stopped)

    running = status.summarize(snapshot(train_finished=None, latest_checkpoint_age_secs=12.0,
                                        checkpoints=[100]))
    assert running['training']['percent'] == 25.0
    assert ('training    step 100/400 (25%), not finished: running, or stopped before '
            '--train_steps; latest checkpoint 12 s ago') in status.render_text(running).splitlines()


def test_empty_model_dir():
    report = status.summarize(status.Snapshot('runs/new', {}, [], None, None, {}, {}))
    assert report['training']['state'] == 'no checkpoint yet'
    text = status.render_text(report)
    assert 'never trained here' in text and 'eval jobs   none' in text


def test_status_shows_which_eval_job_evaluated_each_step():
    a, b = Evaluator(host='h', pid=7, task='evaluator0'), Evaluator('h', 9, 'evaluator1')
    ledgers = {'v': [replace(entry(100, loss=0.2), evaluated_by=a),
                     replace(entry(200, loss=0.1), evaluated_by=b),
                     replace(skipped(300), evaluated_by=a)]}
    report = status.summarize(snapshot(eval_ledgers=ledgers))
    assert report['eval_jobs'][0]['evaluated_by'] == [
        {'evaluator': 'evaluator0 (pid 7 on h)', 'steps': [100, 300]},
        {'evaluator': 'evaluator1 (pid 9 on h)', 'steps': [200]}]
    text = status.render_text(report).splitlines()
    assert '    by      evaluator0 (pid 7 on h): 100, 300' in text
    assert '    by      evaluator1 (pid 9 on h): 200' in text
    assert not status.summarize(snapshot())['eval_jobs'][0]['evaluated_by']  # older ledgers
