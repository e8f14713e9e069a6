"""`./run.sh tabular`: a real table, no code: CSV -> prepare csv -> each canned model trained,
its eval job, export -> predict on held-out rows; held-out accuracy side by side.

The table is the Wisconsin breast cancer data that scikit-learn bundles (569 tumours, 30
measurements each, malignant or benign), written out as a CSV with a header, so it runs
offline. Each stage runs the command a user would type, shown before it runs; logs go to
WORKDIR/logs/.
"""
import csv
import itertools
import json
import os
import shutil
import time

from absl import flags

from common import cli
from demos.digits import run_stage
from input_fns.records import split
from input_fns.tables import csv_tables
from trainer.model_dir import run_files

FLAGS = flags.FLAGS
MODELS = ('dnn_classifier', 'linear_classifier', 'wide_deep_classifier',
          'boosted_trees_classifier')
# A layer of each tree from 7 batches (224 of the 450 training rows); (28 trees x 3 layers + the
# bias) x 7 = 595 steps, within the default --train_steps: training ends when they are grown.
MODEL_FLAGS = {'boosted_trees_classifier': ['--n_trees=28', '--max_depth=3',
                                            '--n_batches_per_layer=7', '--learning_rate=0.3']}
VALIDATION_FRACTION = 0.2


def define_flags():
    flags.DEFINE_string('workdir', 'runs/tabular', 'Where the CSV, shards, models, exports and '
                        'logs go (models and exports are replaced on each run).')
    flags.DEFINE_integer('train_steps', 600, 'Training steps of each model (batch 32).',
                         lower_bound=1)
    flags.DEFINE_integer('num_predict', 4, 'Held-out rows to predict through each export.',
                         lower_bound=1)


def write_breast_cancer_csv(path: str):
    """The bundled data as a user would have it: a header, then one row a tumour."""
    from sklearn.datasets import load_breast_cancer
    data = load_breast_cancer()
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(list(data.feature_names) + ['diagnosis'])
        for values, target in zip(data.data, data.target):
            writer.writerow([f'{value:g}' for value in values] + [data.target_names[target]])


def write_held_out_rows(source: str, path: str, count: int):
    """`count` rows that prepare put in the validation split (the same hash of the row), the
    classes in turn."""
    with open(source, newline='') as f:
        rows = list(csv.reader(f))
    by_class = {}
    for row in rows[1:]:
        if split.is_validation(csv_tables.row_key(row).encode(), VALIDATION_FRACTION):
            by_class.setdefault(row[-1], []).append(row)
    in_turn = [row for group in itertools.zip_longest(*by_class.values()) for row in group if row]
    held_out = in_turn[:count]
    with open(path, 'w', newline='') as f:
        csv.writer(f).writerows([rows[0]] + held_out)
    return [row[-1] for row in held_out]


def train_and_evaluate(model: str, data: str, work: str, logs: str):
    """Trains one model, runs its eval job (ledger, best export); its final evaluation."""
    model_dir, exports = os.path.join(work, model), os.path.join(work, 'exports', model)
    shutil.rmtree(model_dir, ignore_errors=True)
    shutil.rmtree(exports, ignore_errors=True)
    common = [f'--model={model}', f'--model_dir={model_dir}']
    run_stage(f'train_{model}', 'trainer.main', common + MODEL_FLAGS.get(model, []) + [
        '--mode=train', f'--train_files={data}/train-*', f'--train_steps={FLAGS.train_steps}',
        '--batch_size=32', '--save_checkpoints_steps=200', '--log_every_n_steps=200'], logs)
    run_stage(f'eval_job_{model}', 'trainer.main', common + [
        '--mode=continuous_eval', f'--eval_files={data}/validation-*', '--eval_name=validation',
        f'--export_dir={exports}', '--export_metric=accuracy'], logs)
    final_step = run_files.train_finished(model_dir).step  # boosted trees: once all are grown
    ledger = os.path.join(model_dir, 'eval_validation', 'results', f'step-{final_step:09d}.json')
    with open(ledger) as f:
        return json.load(f)['metrics'], exports


def main(argv):
    del argv
    started = time.time()
    work = FLAGS.workdir
    data, logs = os.path.join(work, 'data'), os.path.join(work, 'logs')
    os.makedirs(logs, exist_ok=True)
    source = os.path.join(work, 'breast_cancer.csv')
    write_breast_cancer_csv(source)
    print(f'wrote {source}: scikit-learn\'s Wisconsin breast cancer data, 569 rows', flush=True)
    run_stage('prepare', 'input_fns.prepare', [
        'csv', f'--source={source}', '--label=diagnosis', f'--output_dir={data}',
        f'--validation_fraction={VALIDATION_FRACTION}', '--num_shards=4',
        '--num_eval_shards=1'], logs)
    rows = os.path.join(work, 'held_out_rows.csv')
    truth = write_held_out_rows(source, rows, FLAGS.num_predict)
    results = {}
    for model in MODELS:
        metrics, exports = train_and_evaluate(model, data, work, logs)
        lines = run_stage(f'predict_{model}', 'trainer.main', [
            '--mode=predict', f'--saved_model={exports}/best', rows], logs).splitlines()
        predicted = [json.loads(line)['classes'] for line in lines]
        print(f'   held-out rows: predicted {predicted}, true {truth}', flush=True)
        results[model] = metrics

    manifest = json.load(open(os.path.join(data, 'manifest.json')))
    held_out = manifest['splits']['validation']['num_records']
    print(f'\nDemo finished in {time.time() - started:.0f}s. Held-out accuracy on the same '
          f'{held_out} rows (never trained on), at the final step:')
    print(f'  {"model":<24} {"step":>5} {"accuracy":>9} {"auc":>7} {"loss":>7}')
    for model, metrics in results.items():
        print(f'  {model:<24} {metrics["global_step"]:>5} {metrics["accuracy"]:>9.4f} '
              f'{metrics["auc"]:>7.4f} {metrics["loss"]:>7.4f}')
    print(f'  shards and schema: {data}/manifest.json; models: {work}/<model>/; exports: '
          f'{work}/exports/<model>/best')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
