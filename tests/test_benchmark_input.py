"""--mode=benchmark_input: stage pipelines, the verdict, and the CLI on tiny data."""
import json

import numpy as np
import pytest

from helpers import run_module, run_prepare
from input_fns.prepare import command as prepare
from models import registry
from trainer.input_kinds import registry as input_kinds
from trainer.run import benchmark_input

STAGES = [('read', 1000.0), ('+ parse', 200.0), ('+ prefetch', 210.0)]


def test_stage_costs_are_what_each_stage_adds():
    costs = dict(benchmark_input.stage_costs(STAGES))
    assert costs['read'] == pytest.approx(1.0)
    assert costs['+ parse'] == pytest.approx(4.0)
    assert costs['+ prefetch'] == 0.0  # faster than the stage before: adds nothing


def test_verdict_input_bound_and_not():
    bound = benchmark_input.verdict(STAGES, train_steps_per_sec=420.0)
    assert bound.startswith('input-bound: the training step could take 420.0 batches/sec but '
                            'the input_fn delivers 210.0 (2.00x short: the step would wait 50%')
    assert bound.endswith('slowest input stage: + parse (adds 4.00 ms a batch; the input_fn '
                          'takes 4.76)')
    free = benchmark_input.verdict(STAGES, train_steps_per_sec=105.0)
    assert free.startswith('not input-bound: the input_fn delivers 2.00x the batches')


def test_image_stages_build_on_each_other(digit_shards):
    spec = registry.get('mnist_cnn')
    stages = input_kinds.for_model(spec).training_input_stages(spec, digit_shards.train_pattern,
                                                               '--train_files', batch_size=8)
    names = [name for name, _ in stages]
    assert names == ['read: interleave, shuffle, batch', '+ parse the batch',
                     '+ prefetch: the input_fn']
    read, parsed, full = (next(iter(make())) for _, make in stages)
    assert read.shape == (8,) and read.dtype.name == 'string'
    assert parsed[0]['image'].shape == (8, 28, 28, 1) and full[0]['image'].shape == (8, 28, 28, 1)


def test_cli_prints_its_verdict(tmp_path):
    out = str(tmp_path / 'csv')
    run_prepare(prepare.prepare_csv_example, output_dir=out, num_shards=2, num_eval_shards=1,
                rows_per_shard=16, num_features=1024)
    result = run_module('trainer.main', '--model=csv_mlp', '--mode=benchmark_input',
                        f'--train_files={out}/train-*', '--batch_size=8',
                        '--benchmark_batches=6', '--benchmark_train_steps=3',
                        '--precision=mixed_bfloat16')
    lines = result.stdout.splitlines()
    assert lines[0].startswith('benchmark_input: --model=csv_mlp --batch_size=8 '
                               '--precision=mixed_bfloat16, ')
    verdict = next(line for line in lines if line.startswith('verdict: '))
    report = json.loads(lines[-1])
    assert (report['precision'], report['xla']) == ('mixed_bfloat16', False)
    assert [s['stage'] for s in report['stages']] == [
        'read: interleave, shuffle, batch', '+ parse the batch', '+ prefetch: the input_fn']
    assert all(np.isfinite(s['batches_per_sec']) and s['batches_per_sec'] > 0
               for s in report['stages'])
    input_bound = report['stages'][-1]['batches_per_sec'] < report['train_steps_per_sec']
    assert report['input_bound'] == input_bound
    assert verdict.startswith('verdict: input-bound' if input_bound else 'verdict: not input-bound')
    assert 'slowest input stage: ' in verdict

