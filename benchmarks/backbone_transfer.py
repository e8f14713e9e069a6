"""A pretrained backbone against the same backbone from random initialisation (issue 70), offline.

`python -m benchmarks.backbone_transfer --work_dir=DIR`: the digit photos (demos/digit_photos.py)
split by class: MobileNetV2 (alpha 0.35, 32x32) pretrained as a plain Keras classifier on the
photos of 5-9, its backbone saved with save_weights; then image_classifier on a few photos of
0-4 (classes the backbone never saw) from that file, frozen then fine-tuned, against the same
backbone from random initialisation at the same steps. Prints each run's validation accuracy.
"""
import json
import os
import shutil
import subprocess
import sys

import tensorflow as tf
from absl import flags

from common import cli
from demos import digit_photos

PRETRAIN, TARGET = digit_photos.NAMES[5:], digit_photos.NAMES[:5]
SIZE, ALPHA = 32, 0.35
BACKBONE = f'backbone=mobilenet_v2,backbone_alpha={ALPHA},backbone_image_size={SIZE}'


def define_flags():
    flags.DEFINE_string('work_dir', None, 'Where the photos, shards, weights and runs go.')
    flags.DEFINE_integer('pretrain_epochs', 15, 'Keras epochs over the photos of 5-9.')
    flags.DEFINE_integer('photos_per_class', 30, 'Photos of each of 0-4 kept (about half train).')
    flags.DEFINE_integer('train_steps', 300, 'image_classifier steps of each run.')
    flags.DEFINE_integer('freeze_backbone_steps', 100, 'Steps the pretrained backbone is frozen.')
    flags.mark_flag_as_required('work_dir')


def class_folders(photos: str, out: str, names, per_class=None) -> str:
    """out/<name>/ for each name: copies of photos/<name>/'s first per_class photos (all: None)."""
    for name in names:
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for photo in sorted(os.listdir(os.path.join(photos, name)))[:per_class]:
            shutil.copy(os.path.join(photos, name, photo), os.path.join(out, name, photo))
    return out


def pretrain(folder: str, weights: str, epochs: int) -> float:
    """MobileNetV2 + a 5-way head, trained by Keras' fit on folder; the backbone's weights to
    `weights`; returns the held-out accuracy of the last epoch."""
    tf.keras.utils.set_random_seed(0)
    splits = [tf.keras.utils.image_dataset_from_directory(
        folder, image_size=(SIZE, SIZE), batch_size=32, validation_split=0.2, subset=subset,
        seed=0) for subset in ('training', 'validation')]
    backbone = tf.keras.applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=ALPHA,
                                                 include_top=False, weights=None, pooling='avg')
    for layer in backbone.layers:  # Keras' 0.999 leaves the moving statistics near their
        if isinstance(layer, tf.keras.layers.BatchNormalization):  # start in a few hundred steps
            layer.momentum = 0.9
    inputs = tf.keras.Input((SIZE, SIZE, 3))
    outputs = tf.keras.layers.Dense(len(PRETRAIN))(
        backbone(tf.keras.applications.mobilenet_v2.preprocess_input(inputs)))
    model = tf.keras.Model(inputs, outputs)
    model.compile('adam', tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=['accuracy'])
    history = model.fit(splits[0], validation_data=splits[1], epochs=epochs, verbose=2)
    backbone.save_weights(weights)
    return history.history['val_accuracy'][-1]


def trainer(*args) -> None:
    subprocess.run([sys.executable, '-m', 'trainer.main', '--model=image_classifier', *args],
                   check=True)


def fine_tune_run(work: str, name: str, steps: int, params: str, *extra) -> float:
    """image_classifier trained on the 0-4 shards, then evaluated once; its accuracy."""
    model_dir = os.path.join(work, 'runs', name)
    trainer('--mode=train', f'--model_dir={model_dir}', f'--train_files={work}/shards/train-*',
            f'--train_steps={steps}', '--batch_size=32', f'--save_checkpoints_steps={steps}',
            f'--model_params={params}', *extra)
    trainer('--mode=evaluate', f'--model_dir={model_dir}', f'--eval_files={work}/shards/validation-*')
    result = os.path.join(model_dir, 'eval_default', 'results', f'step-{steps:09d}.json')
    with open(result) as f:
        return json.load(f)['metrics']['accuracy']


def main(argv):
    options = flags.FLAGS
    work = options.work_dir
    photos = os.path.join(work, 'photos')
    if not os.path.isdir(photos):
        digit_photos.write_digit_photos(photos)
    weights, record = (os.path.join(work, f'digits_5_to_9.{ending}') for ending in ('h5', 'json'))
    if not os.path.isfile(record):  # pretrained once: the later runs compare fine-tunings
        accuracy = pretrain(class_folders(photos, os.path.join(work, 'pretrain'), PRETRAIN),
                            weights, options.pretrain_epochs)
        with open(record, 'w') as f:
            json.dump({'held_out_accuracy': accuracy}, f)
    with open(record) as f:
        pretrained = json.load(f)['held_out_accuracy']
    target = class_folders(photos, os.path.join(work, f'target{options.photos_per_class}'),
                           TARGET, options.photos_per_class)
    shutil.rmtree(os.path.join(work, 'shards'), ignore_errors=True)
    shutil.rmtree(os.path.join(work, 'runs'), ignore_errors=True)
    subprocess.run([sys.executable, '-m', 'input_fns.prepare', 'images', f'--source_dir={target}',
                    f'--output_dir={work}/shards', f'--image_size={SIZE}x{SIZE}', '--channels=1',
                    '--validation_fraction=0.5', '--num_shards=1'], check=True)
    steps, frozen = options.train_steps, options.freeze_backbone_steps
    recipe = (f'{BACKBONE},freeze_backbone_steps={frozen},fine_tune_learning_rate=0.0001')
    results = {
        'pretrained (frozen, then fine-tuned)': fine_tune_run(
            work, 'pretrained', steps, recipe, f'--backbone_weights={weights}'),
        'pretrained, all trained from step 0': fine_tune_run(
            work, 'pretrained_whole', steps, BACKBONE, f'--backbone_weights={weights}'),
        'random init, the same recipe': fine_tune_run(work, 'random_recipe', steps, recipe),
        'random init, all trained from step 0': fine_tune_run(work, 'random', steps, BACKBONE)}
    print(f'pretraining on 5-9 ({options.pretrain_epochs} epochs): held-out accuracy '
          f'{pretrained:.4f}')
    for name, accuracy in results.items():
        print(f'{name}: validation accuracy {accuracy:.4f} at step {steps}')
    return 0


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
