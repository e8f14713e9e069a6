"""The end-to-end demo behind `./run.sh`: offline digits -> shards -> train -> evaluate -> export -> predict.

Each stage runs the same command a user would type, shown before it runs; full
logs go to WORKDIR/logs/. Uses sklearn's bundled handwritten digits, so it needs
no download.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from absl import flags

from common import cli
from trainer.serving import export

FLAGS = flags.FLAGS
PROGRESS_LINE = re.compile(r'hooks\.py:\d+\] (step .*)')


def define_flags():
    flags.DEFINE_string('workdir', 'runs/demo', 'Where the shards, model, export and logs go '
                        '(the model and export are replaced on each run).')
    flags.DEFINE_integer('train_steps', 1000, 'Training steps (batch 100).', lower_bound=1)
    flags.DEFINE_integer('num_predict', 5, 'Held-out images to predict through the SavedModel.',
                         lower_bound=1)


def run_stage(name, module, args, log_dir):
    """Runs `python -m module args`, echoing training progress; returns its stdout."""
    command = [sys.executable, '-m', module] + args
    print(f'\n== {name}: python -m {module} {" ".join(args)}', flush=True)
    log_path = os.path.join(log_dir, f'{name}.log')
    output_path = os.path.join(log_dir, f'{name}.out')
    started = time.time()
    with open(log_path, 'w') as log, open(output_path, 'w') as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.PIPE, text=True)
        for line in process.stderr:
            log.write(line)
            progress = PROGRESS_LINE.search(line)
            if progress:
                print(f'   {progress.group(1)}', flush=True)
    if process.wait() != 0:
        sys.stdout.write(''.join(open(log_path).readlines()[-15:]))
        raise SystemExit(f'demo: stage {name} failed (exit {process.returncode}); log: {log_path}')
    print(f'   done in {time.time() - started:.1f}s (log: {log_path})', flush=True)
    with open(output_path) as output:
        return output.read()


def write_held_out_pngs(data_dir, out_dir, count):
    """Writes the first `count` validation images as PNG files named with their true label."""
    import tensorflow as tf
    from input_fns.images import image_records

    os.makedirs(out_dir, exist_ok=True)
    files = sorted(glob.glob(os.path.join(data_dir, 'validation-*.tfrecord')))
    batch = tf.data.TFRecordDataset(files).batch(count).map(
        image_records.parse_batch_fn([28, 28, 1]))
    features, labels = next(iter(batch))
    paths = []
    for i, label in enumerate(labels.numpy()):
        path = os.path.join(out_dir, f'heldout{i}_label{label}.png')
        pixels = tf.cast(tf.round(features['image'][i] * 255.0), tf.uint8)
        tf.io.write_file(path, tf.io.encode_png(pixels))
        paths.append((path, int(label)))
    return paths


def main(argv):
    del argv
    started = time.time()
    work = FLAGS.workdir
    data, model, exports, images = (os.path.join(work, d) for d in
                                    ('data', 'model', 'export', 'images'))
    logs = os.path.join(work, 'logs')
    for stale in (model, exports, images):
        shutil.rmtree(stale, ignore_errors=True)
    os.makedirs(logs, exist_ok=True)

    run_stage('prepare', 'input_fns.prepare', ['digits', f'--output_dir={data}'], logs)
    common = ['--model=mnist_cnn', f'--model_dir={model}']
    run_stage('train', 'trainer.main', common + [
        '--mode=train', f'--train_files={data}/train-*', f'--train_steps={FLAGS.train_steps}',
        '--batch_size=100', '--log_every_n_steps=200'], logs)
    metrics = json.loads(run_stage('evaluate', 'trainer.main', common + [
        '--mode=evaluate', f'--eval_files={data}/validation-*'], logs))
    saved_model = json.loads(run_stage('export', 'trainer.main', common + [
        '--mode=export', f'--export_dir={exports}'], logs))['saved_model']
    samples = write_held_out_pngs(data, images, FLAGS.num_predict)
    predictions = [json.loads(line) for line in run_stage(
        'predict', 'trainer.main',
        ['--mode=predict', f'--saved_model={saved_model}'] + [p for p, _ in samples],
        logs).splitlines()]
    for (path, label), prediction in zip(samples, predictions):
        print(f'   {os.path.basename(path)}: predicted {prediction["classes"]} '
              f'(p={max(prediction["probabilities"]):.3f}), true {label}')

    manifest = json.load(open(os.path.join(data, 'manifest.json')))
    print(f'\nDemo finished in {time.time() - started:.0f}s.')
    print(f'  held-out accuracy: {metrics["accuracy"]:.4f} on '
          f'{manifest["splits"]["validation"]["num_records"]} digits never trained on '
          f'(global step {metrics["global_step"]})')
    print(f'  shards:      {data}/  (manifest.json)')
    print(f'  model_dir:   {model}/  (checkpoints, TensorBoard summaries, flags.txt)')
    signatures = ', '.join(sorted(export.signature_defs(saved_model)))
    print(f'  SavedModel:  {saved_model}/  (signatures {signatures})')
    print(f'  logs:        {logs}/')
    print(f'  TensorBoard: .venv/bin/tensorboard --logdir={model}')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
