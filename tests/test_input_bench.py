"""`./run.sh bench` end to end on tiny synthetic data: every row measured, every ratio from them."""
import json

import pytest

from benchmarks import input_bench
from conftest import run_module


def test_bench_measures_every_row_and_takes_its_ratios_from_them(tmp_path):
    output = tmp_path / 'bench.json'
    result = run_module('benchmarks.input_bench', f'--data_dir={tmp_path}/no_data',
                        f'--output_json={output}', '--mnist_examples=100', '--face_people=8',
                        '--seconds=0.05', '--warmup_seconds=0', '--repetitions=1',
                        '--train_steps=1', '--warmup_steps=1')
    report = json.loads(output.read_text())

    assert report['data']['mnist'].startswith('synthetic')  # no data dir: made its own
    assert report['data']['faces'].startswith('synthetic')
    values = {row['key']: row['value'] for row in report['rows']}
    for section in ('mnist.', 'train.', 'precision.', 'faces.', 'python.', 'convert.'):
        assert any(key.startswith(section) for key in values), section
    assert all(value > 0 for value in values.values()), values

    assert [t['target'] for t in report['targets']] == [t[0] for t in input_bench.TARGETS]
    for (what, numerator, denominator, _, _), checked in zip(input_bench.TARGETS,
                                                             report['targets']):
        keys = numerator if isinstance(numerator, tuple) else (numerator,)
        expected = max(values[key] for key in keys) / values[denominator]
        assert checked['ratio'] == pytest.approx(expected), what
    assert 'targets' in result.stdout and 'this service\'s in-graph sampler' in result.stdout
