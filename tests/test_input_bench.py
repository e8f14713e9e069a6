"""`./run.sh bench` end to end on tiny synthetic data: every row measured, every ratio from them."""
import json
import statistics

import pytest

from benchmarks import bench_targets, repeats
from helpers import run_module


@pytest.mark.slow  # the whole bench on tiny data, two rounds: ./run.sh test-slow
def test_bench_measures_every_row_and_takes_its_ratios_from_them(tmp_path):
    output = tmp_path / 'bench.json'
    result = run_module('benchmarks.input_bench', f'--data_dir={tmp_path}/no_data',
                        f'--output_json={output}', '--mnist_examples=100', '--face_people=8',
                        '--seconds=0.05', '--warmup_seconds=0', '--repetitions=2',
                        '--train_steps=1', '--pair_train_steps=1', '--warmup_steps=1',
                        '--larger_batch_size=8', '--ceiling_size=64',
                        '--ceiling_runs=2', '--ceiling_seconds=0.01', '--intra_op_threads=2',
                        '--pair_batch_size=4', '--face_memory_scale=2', '--table_rows=300',
                        '--table_train_steps=1', '--image_photos=20', '--image_train_steps=1',
                        '--emulated_bfloat16', timeout=600)
    report = json.loads(output.read_text())

    assert report['data']['mnist'].startswith('synthetic')  # no data dir: made its own
    assert report['data']['faces'].startswith('synthetic')
    rows = {row['key']: row for row in report['rows']}
    for section in ('mnist.', 'train.', 'precision.', 'faces.', 'python.', 'convert.',
                    'ceiling.', 'tables.'):
        assert any(key.startswith(section) for key in rows), section
    assert {'faces.sampler', 'faces.sampler_augment', 'faces.generator_augment',
            'faces.in_memory', 'faces.in_memory_augment', 'memory.faces.streaming_1x',
            'memory.faces.streaming_scaled', 'memory.faces.in_memory_scaled'} <= set(rows)
    for key, row in rows.items():
        assert all(value > 0 for value in row['repetitions']), key
        assert len(row['repetitions']) == (
            1 if key.startswith(('convert.', 'memory.', 'images.bytes_'))
            or key in ('tables.prepare', 'tables.arrow_parse', 'tables.make_csv_dataset_pass',
                       'images.prepare') else 2), key
        assert row['value'] == pytest.approx(statistics.median(row['repetitions'])), key

    machine = report['machine']
    assert machine['intra_op_threads'] == 2 and 'intra-op 2' in machine['threads']
    assert isinstance(machine['onednn'], bool) and machine['cpu_model']
    for precision in ('cpu float32', 'cpu bfloat16'):
        ceiling = machine['ceiling'][precision]
        assert len(ceiling['runs']) == 2 and ceiling['gflops'] == max(ceiling['runs']) > 0
    memory = machine['ceiling']['cpu memory read']
    assert len(memory['runs']) == 2 and memory['gbps'] == max(memory['runs']) > 0
    counted = report['flops']
    assert counted['mnist_cnn']['layer_shapes_per_example'] == 82_049_024
    for name, count in counted.items():
        assert 1 < count['profiler_per_example'] / count['layer_shapes_per_example'] < 1.01, name
    for prefix, model, ceiling in (('precision', 'mnist_cnn', 'ceiling'),
                                   ('face_precision', 'face_embedding', 'face_ceiling')):
        by_batch = counted[model]['profiler_per_example_by_batch']  # JSON: '8', not 8
        rows_at = [('float32', 'float32', counted[model]['batch_size']),
                   ('bfloat16_xla', 'bfloat16', counted[model]['batch_size'])]
        if model == 'mnist_cnn':  # again at --larger_batch_size, counted at that batch
            assert set(by_batch) == {str(counted[model]['batch_size']), '8'}
            rows_at.append(('bfloat16_batch8', 'bfloat16', 8))
        for suffix, dtype, batch_size in rows_at:
            gflops = rows[f'ceiling.{prefix}.{suffix}.gflops']['repetitions']
            assert gflops == pytest.approx([
                examples * by_batch[str(batch_size)] / 1e9
                for examples in rows[f'{prefix}.{suffix}']['repetitions']])
            same_round_ceiling = rows[f'{ceiling}.{dtype}']['repetitions']  # interleaved
            assert rows[f'ceiling.{prefix}.{suffix}.fraction']['repetitions'] == pytest.approx(
                [100 * value / limit for value, limit in zip(gflops, same_round_ceiling)])
    assert {'threads.default', 'threads.intra1_inter1', 'threads.intra2_inter2'} <= set(rows)

    targets = bench_targets.targets(larger_batch_size=8)
    assert [t['target'] for t in report['targets']] == [t[0] for t in targets]
    for (what, numerator, denominator, _, _), checked in zip(targets, report['targets']):
        keys = numerator if isinstance(numerator, tuple) else (numerator,)
        best = max(keys, key=lambda key: rows[key]['value'])
        paired = repeats.paired_ratios(rows[best]['repetitions'],
                                       rows[denominator]['repetitions'])
        assert checked['per_round'] == pytest.approx(paired), what  # this run's rounds, paired
        assert checked['ratio'] == pytest.approx(statistics.median(paired)), what
        assert checked['verdict'] in ('met', 'SHORT', 'not resolved')
    assert report['targets_not_judged'] == []
    assert "this service's streaming in-graph sampler" in result.stdout and 'ceiling:' in result.stdout


@pytest.mark.parametrize('gpu, emulated, units, wanted', [
    (False, False, False, False),  # a CPU that emulates bfloat16: left out unless asked
    (False, True, False, True), (True, False, False, True),
    (False, False, True, True), (False, False, None, True),  # units, or cannot tell
])
def test_bfloat16_training_rows_are_left_out_on_a_cpu_that_emulates_it(monkeypatch, gpu,
                                                                      emulated, units, wanted):
    from benchmarks import precision_bench
    monkeypatch.setattr(precision_bench.devices, 'cpu_has_bfloat16_units', lambda: units)
    assert precision_bench.bfloat16_rows_wanted(gpu, emulated) is wanted
    rows = precision_bench.precision_rows(precision_bench.MNIST, None, 4, None, 1, 1,
                                          larger_batch=(None, 8), bfloat16=wanted)
    keys = {key for key, *_ in rows}
    float32_rows = {'precision.float32', 'precision.xla', 'precision.float32_batch8'}
    bfloat16_rows = {'precision.bfloat16', 'precision.bfloat16_xla', 'precision.bfloat16_batch8'}
    assert keys == (float32_rows | bfloat16_rows if wanted else float32_rows)


def test_targets_with_rows_left_out_are_named_not_judged():
    from benchmarks import bench_report
    all_targets = bench_targets.targets(larger_batch_size=8)
    keys = {key for _, numerator, denominator, *_ in all_targets
            for key in (*(numerator if isinstance(numerator, tuple) else (numerator,)),
                        denominator)}
    ceilings = ('ceiling.bfloat16', 'face_ceiling.bfloat16')  # measured on every machine
    left_out = {key for key in keys if 'bfloat16' in key and key not in ceilings}
    results = bench_report.Results()
    for key in sorted(keys - left_out):
        if not key.startswith('images.'):  # a section not run: its targets are neither
            results.add(key, 'section', key, [1.0, 1.1], 'x')
    checked, not_judged = bench_targets.check_targets(results, larger_batch_size=8)

    assert [t['target'] for t in not_judged] == [
        'training: best of bfloat16/XLA vs float32',
        'MNIST CNN: best bfloat16 training vs the bfloat16 ceiling',
        'face_embedding: best bfloat16 training vs the bfloat16 ceiling']
    assert not_judged[0]['missing'] == ['precision.bfloat16', 'precision.bfloat16_xla']
    judged = {t['target'] for t in checked}
    assert not judged & {t['target'] for t in not_judged}
    assert 'MNIST CNN: best float32 training vs the float32 ceiling' in judged
    assert not any(t['target'].startswith('image') for t in checked + not_judged)
    assert 'not judged (rows left out): training: best of' in bench_report.report(
        results, [], checked, not_judged)


def test_interleave_alternates_the_order_and_pairs_the_rounds():
    order = []
    values = repeats.interleave({key: (lambda key=key: order.append(key) or len(order))
                                 for key in 'ABC'}, rounds=3)
    assert ''.join(order) == 'ABCCBAABC'
    assert values == {'A': [1, 6, 7], 'B': [2, 5, 8], 'C': [3, 4, 9]}


@pytest.mark.parametrize('numerators, denominators, verdict', [
    ([1.10, 1.00, 1.05], [1.0, 1.0, 1.0], 'not resolved'),  # 1.05 in [1.00, 1.10] against 1.02
    ([1.10, 1.09, 1.08], [1.0, 1.0, 1.0], 'met'),           # 1.09 +- 0.01
    ([0.90, 0.96, 0.93], [1.0, 1.0, 1.0], 'SHORT'),         # 0.93 +- 0.03
    ([2.0, 1.0, 2.1], [2.0, 1.0, 2.0], 'not resolved'),     # paired: 1.0, 1.0, 1.05
])
def test_a_ratio_whose_interval_holds_the_target_is_not_resolved(numerators, denominators,
                                                                verdict):
    checked = repeats.check(numerators, denominators, 1.02, at_least=True)
    assert checked['verdict'] == verdict
    assert checked['per_round'] == pytest.approx([n / d for n, d in zip(numerators, denominators)])


@pytest.mark.parametrize('rounds, ranks', [(3, (1, 3)), (5, (1, 5)), (8, (1, 8)), (9, (2, 8)),
                                           (20, (6, 15))])  # the published 95% table's ranks
def test_the_median_interval_takes_the_order_statistics_of_95_percent(rounds, ranks):
    assert repeats.median_interval(list(range(rounds, 0, -1))) == (ranks[0], ranks[1])


def test_with_nine_rounds_one_outlying_round_does_not_unresolve_a_target():
    ratios = [1.05, 1.06, 1.07, 0.90, 1.06, 1.05, 1.08, 1.06, 1.20]
    checked = repeats.check(ratios, [1.0] * 9, 1.02, at_least=True)
    assert checked['interval'] == [1.05, 1.08] and checked['verdict'] == 'met'
    assert repeats.check(ratios[:5], [1.0] * 5, 1.02, at_least=True)['verdict'] == 'not resolved'


def test_at_most_targets_and_counts_measured_once():
    assert repeats.check([110], [100], 1.2, at_least=False)['verdict'] == 'met'
    assert repeats.check([130], [100, 101], 1.2, at_least=False)['per_round'] == pytest.approx(
        [1.3, 130 / 101])
    with pytest.raises(ValueError, match='same rounds'):
        repeats.paired_ratios([1, 2], [1, 2, 3])


def test_drift_compares_each_target_of_two_runs(tmp_path):
    from benchmarks import drift
    first, second = tmp_path / 'a.json', tmp_path / 'b.json'
    first.write_text(json.dumps({'targets': [{'target': 'x', 'ratio': 2.0},
                                             {'target': 'y', 'ratio': 1.0}]}))
    second.write_text(json.dumps({'targets': [{'target': 'x', 'ratio': 2.2},
                                              {'target': 'y', 'ratio': 1.0}]}))
    assert drift.drifts(drift.read_targets(str(first)), drift.read_targets(str(second))) == [
        ('x', 2.0, 2.2, pytest.approx(0.1)), ('y', 1.0, 1.0, 0.0)]
    (tmp_path / 'bad.json').write_text('{}')
    with pytest.raises(drift.UserError, match='not a bench --output_json'):
        drift.read_targets(str(tmp_path / 'bad.json'))
