"""`./run.sh faces`: face photos -> shards -> random training pairs -> face-pair net -> LFW protocol
-> two-image SavedModel -> predict.

Without --lfw_dir it renders synthetic identities in LFW's folder layout first,
so it runs offline; with --lfw_dir=ROOT it trains on real LFW photos.
"""
import json
import os
import shutil
import time

from absl import flags

from common import cli
from demos.digits import run_stage

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string('workdir', 'runs/faces_demo', 'Where photos, shards, model, export and '
                        'logs go (the model and export are replaced on each run).')
    flags.DEFINE_string('lfw_dir', None, 'Real LFW photos (ROOT/<Name>/<Name>_0001.jpg); '
                        'default: render synthetic identities.')
    flags.DEFINE_enum('model', 'face_siamese', ('face_siamese', 'face_embedding', 'face_diff'), 'The face-pair model.')
    flags.DEFINE_integer('train_steps', 600, 'Training steps.', lower_bound=1)
    flags.DEFINE_integer('batch_size', 32, 'Pairs per training batch.', lower_bound=1)
    flags.DEFINE_integer('num_people', 150, 'Synthetic identities to render.', lower_bound=4)


def main(argv):
    del argv
    started = time.time()
    work = FLAGS.workdir
    data, model, exports, logs = (os.path.join(work, d) for d in ('data', 'model', 'export', 'logs'))
    for stale in (model, exports):
        shutil.rmtree(stale, ignore_errors=True)
    os.makedirs(logs, exist_ok=True)

    photos = FLAGS.lfw_dir
    if not photos:
        photos = os.path.join(work, 'synthetic_lfw')
        run_stage('render', 'input_fns.faces.synthetic_faces',
                  [f'--output_dir={photos}', f'--num_people={FLAGS.num_people}'], logs)
    run_stage('prepare', 'input_fns.prepare',
              ['faces', f'--source_dir={photos}', f'--output_dir={data}', '--num_pairs=300'], logs)
    common = [f'--model={FLAGS.model}', f'--model_dir={model}']
    run_stage('train', 'trainer.main', common + [
        '--mode=train', f'--train_files={data}/train-*', f'--train_steps={FLAGS.train_steps}',
        f'--batch_size={FLAGS.batch_size}', '--log_every_n_steps=100', '--augment'], logs)
    metrics = json.loads(run_stage('evaluate', 'trainer.main', common + [
        '--mode=evaluate', f'--eval_files={data}/validation_pairs-*',
        f'--threshold_files={data}/train_pairs-*'], logs))
    saved_model = json.loads(run_stage('export', 'trainer.main', common + [
        '--mode=export', f'--export_dir={exports}'], logs))['saved_model']

    pairs_txt = open(os.path.join(data, 'validation_pairs.txt')).read().splitlines()
    same, different = pairs_txt[1].split(), pairs_txt[1 + int(pairs_txt[0])].split()
    root = os.path.join(photos, 'lfw') if os.path.isdir(os.path.join(photos, 'lfw')) else photos

    def path(name, number):
        return os.path.join(root, name, f'{name}_{int(number):04d}.jpg')

    images = [path(same[0], same[1]), path(same[0], same[2]),
              path(different[0], different[1]), path(different[2], different[3])]
    for line in run_stage('predict', 'trainer.main',
                          ['--mode=predict', f'--saved_model={saved_model}'] + images,
                          logs).splitlines():
        row = json.loads(line)
        decision = ''  # the export decides only when an eval job chose its threshold
        if 'same_person' in row:
            decision = ' -> same person' if row['same_person'] else ' -> different people'
        print(f'   {os.path.basename(row["image_a"])} vs {os.path.basename(row["image_b"])}: '
              f'probability {row["probability"]:.3f} of one person{decision}')

    protocol = metrics['lfw_protocol']
    print(f'\nFaces demo finished in {time.time() - started:.0f}s '
          f'({"real LFW" if FLAGS.lfw_dir else "synthetic identities"}, {FLAGS.model}).')
    print(f'  validation pairs (people never seen in training): accuracy '
          f'{protocol["accuracy"]:.4f} at threshold {protocol["threshold"]:.3f} chosen on '
          f'training pairs, AUC {protocol["auc"]:.4f}, {protocol["num_pairs"]} pairs')
    print(f'  shards:     {data}/  (manifest.json, train_pairs.txt, validation_pairs.txt)')
    print(f'  model_dir:  {model}/')
    print(f'  SavedModel: {saved_model}/  (serving_default: two photos -> probability'
          f'{"; embed: one photo -> embedding" if FLAGS.model != "face_diff" else ""})')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
