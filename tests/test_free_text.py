"""Free text in a table (a support ticket's message, a review) read as its words, in Python for
the vocabulary and in the graph for training and serving, so `refund` in a new message means
what it meant in training."""
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from features import free_text
from helpers import run_prepare
from input_fns.tables import example_tables, prepare_csv, table_records
from serving_loader_checks import check_against_python
from test_canned import files_flags, trainer, validation_records
from test_tables import example, table_args, write, write_records

COMPLAINTS = ['refund', 'broken', 'damaged', 'late', 'never arrived', 'cracked']
PRAISE = ['love', 'great', 'perfect', 'thanks', 'fast delivery', 'beautiful']
FILLER = ('the order I placed last week for my sister was the blue one and it came in a box with '
          'a note from the shop so I am writing about it today').split()


def tickets(count, seed):
    """(message, label) pairs: a complaint names one of COMPLAINTS among filler words, praise
    one of PRAISE; no two messages alike."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        label = rng.choice(['complaint', 'praise'])
        words = rng.sample(FILLER, rng.randint(6, 14))
        words.insert(rng.randrange(len(words) + 1),
                     rng.choice(COMPLAINTS if label == 'complaint' else PRAISE).upper())
        rows.append((' '.join(words) + rng.choice(['.', '!', '?!', '...']), label))
    return rows


def test_the_graphs_words_are_pythons():
    texts = ['Hello, World!', "it's   BROKEN--again\t(twice)\nrefund?", '', '...', 'Café über',
             'a_b c/d e.f 3.5 x' * 30]
    entry = {'name': 'note', 'dtype': 'text', 'count': 6, 'max_words': 100}
    words = table_records.with_derived({'note': tf.constant(texts)}, {'features': [entry]})
    rows = words[free_text.words_name('note')].numpy().tolist()
    assert [[word.decode() for word in row if word] for row in rows] == [
        free_text.words(text)[:100] for text in texts]
    assert free_text.words("it's BROKEN--again") == ['it', 's', 'broken', 'again']
    assert len(rows[0]) == 100  # the longest training value's words; a longer one's first ones


@pytest.mark.slow  # trained to an accuracy; the graph's and Python's words stay fast: ./run.sh test-slow
def test_a_text_column_is_learned_from_its_words_and_the_export_reads_new_messages(
        tmp_path, serving_loader):
    source = write(tmp_path / 'tickets.csv', 'id,message,label\n' + ''.join(
        f'{i},"{message}",{label}\n' for i, (message, label) in enumerate(tickets(400, 1))))
    args = table_args(label='label', validation_fraction=0.25, ignore_columns=['id'])
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'data'), **args)
    [message] = json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']['features']
    assert message['dtype'] == 'text' and 'refund' in message['vocabulary']
    assert 6 <= message['words_per_value'] <= 16 and message['max_words'] <= 16
    # The same messages as whole values: a vocabulary no validation message is in.
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'whole' / 'data'),
                **{**args, 'column_types': 'message:string'})
    accuracy = {}
    for name, folder in (('words', tmp_path), ('whole values', tmp_path / 'whole')):
        result = trainer('--model=linear_classifier', f'--model_dir={folder}/run',
                         *files_flags(folder), '--mode=train_and_evaluate', '--train_steps=200',
                         '--batch_size=32', f'--export_dir={folder}/exports')
        accuracy[name] = float(result.stdout.split('accuracy=')[1].split()[0])
    assert accuracy['words'] >= 0.95 and accuracy['whole values'] < 0.75, accuracy
    exports = f'{tmp_path}/exports'
    version = f'{exports}/{open(f"{exports}/best").read().strip()}'
    check_against_python(serving_loader, version, validation_records(tmp_path)[0])
    new = tickets(100, 2)
    path = write(tmp_path / 'new.csv', 'message\n' + ''.join(f'"{m.lower()}"\n' for m, _ in new))
    lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={tmp_path}/exports/best', path).stdout.splitlines()]
    assert np.mean([line['classes'] == label for line, (_, label) in zip(lines, new)]) >= 0.95


def test_records_of_free_text_are_text(tmp_path):
    records = [example(note=message, label=label) for message, label in tickets(60, 3)]
    (tmp_path / 'mine').mkdir()
    write_records(tmp_path / 'mine' / 'part-0.tfrecord', records)
    run_prepare(example_tables.prepare_examples, source=str(tmp_path / 'mine' / 'part-*'),
                output_dir=str(tmp_path / 'data'), label='label', task=None, max_vocabulary=10,
                weight_column=None)
    [note] = json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']['features']
    assert note['dtype'] == 'text' and len(note['vocabulary']) == 10
