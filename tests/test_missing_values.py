"""A number some training rows lack: read as the training mean, with an indicator of missing
beside it, so a model can learn from a value's absence (features/model_features.py)."""
import json
import random

import pytest
import tensorflow as tf

from helpers import run_prepare
from input_fns.tables import prepare_csv, table_records
from test_canned import files_flags, trainer
from test_tables import table_args, write


def test_a_missing_number_reads_as_the_mean_beside_an_indicator_the_model_learns_from(tmp_path):
    rng = random.Random(0)
    rows = []
    for _ in range(400):  # never defaulted: no months since; a model must see the absence
        months = '' if rng.random() < 0.5 else str(rng.randint(1, 119))
        score = '' if rng.random() < 0.2 else f'{rng.random():.3f}'
        rows.append(f'{months},{score},{rng.random():.3f},{"never" if not months else "some"}\n')
    source = write(tmp_path / 'credit.csv', 'months,score,x,label\n' + ''.join(rows))
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'data'),
                **table_args(label='label', validation_fraction=0.25))
    schema = json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']
    entries = {entry['name']: entry for entry in schema['features']}
    assert [name for name, entry in entries.items() if entry.get('missing_indicator')] == [
        'months', 'score']

    records = [table_records.encode_example(['months', 'score', 'x'], ['int', 'float', 'float'],
                                            values)
               for values in ([7, 0.5, 0.1], [None, None, 0.2])]
    parsed = table_records.with_derived(
        tf.io.parse_example(tf.constant(records), table_records.feature_spec(schema, False)),
        schema)
    assert parsed['months'].numpy().tolist() == [7, round(entries['months']['mean'])]
    assert parsed['score'].numpy().tolist() == pytest.approx([0.5, entries['score']['mean']])
    assert parsed['months_missing'].numpy().tolist() == [b'', b'missing']
    assert parsed['score_missing'].numpy().tolist() == [b'', b'missing']
    assert 'x_missing' not in parsed

    result = trainer('--model=linear_classifier', f'--model_dir={tmp_path}/run',
                     *files_flags(tmp_path), '--mode=train_and_evaluate', '--train_steps=300',
                     '--batch_size=32', f'--export_dir={tmp_path}/exports')
    assert float(result.stdout.split('accuracy=')[1].split()[0]) >= 0.95
    requests = write(tmp_path / 'rows.jsonl', '{"months": 60, "x": 0.5}\n{"x": 0.5}\n'
                                              '{"months": null, "score": 0.5}\n')
    lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={tmp_path}/exports/best',
        requests).stdout.strip().splitlines()]
    assert [line['classes'] for line in lines] == ['some', 'never', 'never']
