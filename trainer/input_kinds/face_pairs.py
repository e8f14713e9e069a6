"""Face photos for training (pairs drawn at random) and fixed pair shards for evaluation.

Evaluation adds LFW's protocol (trainer/input_kinds/pair_protocol.py) to Estimator's metrics.
"""
import numpy as np
import tensorflow as tf
from absl import logging

from common.errors import UserError
from input_fns.faces import face_images, face_pairs
from models import heads
from trainer.input_kinds import base, pair_protocol, registry


def face_geometry(spec, options: base.InputOptions) -> face_images.FaceGeometry:
    height, _, channels = spec.image_shape
    return face_images.FaceGeometry(image_size=options.face_image_size or height,
                                     channels=channels, crop_fraction=options.face_crop_fraction)


def pair_mix(options: base.InputOptions) -> face_pairs.PairMix:
    return face_pairs.PairMix(options.same_fraction, options.self_pair_fraction)


def face_shape(geometry: face_images.FaceGeometry):
    """[height, width, channels] of the photos the model is fed (--face_image_size or its own)."""
    return (geometry.image_size, geometry.image_size, geometry.channels)


class FacePairs(base.InputKind):
    name = 'face_pairs'
    # The 'single' receiver alternative feeds one photo as image_a: its 'embed' output (models
    # that have one) is the embed signature; 'embed' on the pair receiver means nothing.
    signature_renames = {'single:embed': 'embed', 'embed': None}
    last_stage_name = '+ prefetch (and --augment): the input_fn'
    own_options = ('pair_sampler', 'same_fraction', 'self_pair_fraction', 'face_crop_fraction',
                   'face_image_size')
    records_are = 'face photos'
    # lfw_protocol's numbers: 10 folds (the *_mean ones), or a threshold from other pairs.
    extra_metric_names = tuple(f'lfw_protocol_{name}' for name in (
        'accuracy_mean', 'accuracy_std', 'auc_mean', 'num_pairs', 'threshold',
        'threshold_pairs_accuracy', 'accuracy', 'auc'))
    # --pair_sampler: drawn inside tf.data, or the naive Python generator kept for comparison
    # (which draws no self pairs: train_input_fn refuses them there).
    pair_samplers = {
        'graph': face_pairs.sampled_pairs_dataset,
        'generator': lambda files, num_people, geometry, batch_size, seed, mix, **options: (
            face_pairs.generator_pairs_dataset(face_pairs.read_photo_index(files), geometry,
                                               batch_size, seed, mix.same_fraction, **options)),
    }

    def train_input_fn(self, spec, file_pattern, flag_name, batch_size, seed, options):
        if options.self_pair_fraction and options.pair_sampler != 'graph':
            raise UserError(f'--self_pair_fraction needs --pair_sampler=graph (the '
                            f'{options.pair_sampler} sampler is the naive way, kept to measure '
                            'against): leave one of them off')
        if options.self_pair_fraction and not options.augment:
            raise UserError('--self_pair_fraction pairs a photo with itself, which only '
                            '--augment makes two different views: give --augment too')
        return face_pairs.make_train_input_fn(
            file_pattern, face_geometry(spec, options), batch_size, seed=seed,
            mix=pair_mix(options), flag_name=flag_name,
            pairs_dataset=self.pair_samplers[options.pair_sampler], augment=options.augment)

    def eval_input_fn(self, spec, file_pattern, flag_name, batch_size, options):
        return face_pairs.make_eval_input_fn(file_pattern, face_geometry(spec, options),
                                               batch_size, flag_name)

    def earlier_stages(self, spec, file_pattern, flag_name, batch_size, seed, options):
        if options.pair_sampler != 'graph':
            return []
        return face_pairs.sampled_pair_stages(file_pattern, face_geometry(spec, options),
                                                batch_size, seed, pair_mix(options), flag_name)

    def serving_receiver_fn(self, spec, options):
        """serving_default takes two batches of encoded photos; the 'single' alternative one."""
        geometry = face_geometry(spec, options)
        shape = face_shape(geometry)

        def decode(encoded):
            return face_images.decode_any_face(encoded, geometry)

        def receiver_fn():
            bytes_a = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes_a')
            bytes_b = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes_b')
            # Only image_b waits on the check: the 'single' signature feeds image_bytes_a alone.
            same_size = tf.debugging.assert_equal(
                tf.size(bytes_a), tf.size(bytes_b),
                message='image_bytes_a and image_bytes_b must hold as many images (pair i is '
                        'image_bytes_a[i], image_bytes_b[i])')
            with tf.control_dependencies([same_size]):
                image_b = base.decode_batch(bytes_b, decode, shape)
            features = {'image_a': base.decode_batch(bytes_a, decode, shape),
                        'image_b': image_b}
            return tf.estimator.export.ServingInputReceiver(
                features=features,
                receiver_tensors={'image_bytes_a': bytes_a, 'image_bytes_b': bytes_b},
                receiver_tensors_alternatives={'single': {'image_bytes': bytes_a}})

        return receiver_fn

    def warmup_inputs(self, spec, options):
        # A photo whose central crop (--face_crop_fraction) is the size the model is fed.
        size, _, channels = face_shape(face_geometry(spec, options))
        side = round(size / options.face_crop_fraction)
        photo = np.array([base.synthetic_png(side, side, channels)], object)
        return {'image_bytes_a': photo, 'image_bytes_b': photo, 'image_bytes': photo}

    def extra_metrics(self, estimator, eval_input_fn, eval_files, make_eval_input_fn,
                      threshold_files):
        """LFW's protocol per checkpoint: accuracy at a threshold chosen elsewhere, and AUC."""
        threshold_fn = threshold_files and make_eval_input_fn(threshold_files, '--threshold_files')
        return lambda checkpoint: {pair_protocol.REPORT_KEY: pair_protocol.checkpoint_report(
            estimator, checkpoint, eval_input_fn, eval_files, threshold_fn, threshold_files)}

    def serving_decision(self, model_dir, step, eval_name):
        """same_person in the export, at the threshold an eval job chose on calibration pairs."""
        record, why_not = pair_protocol.chosen_threshold(model_dir, step, eval_name)
        if record is None:
            logging.warning('export: no same_person output (only the probability): %s', why_not)
            return None
        logging.info('export: same_person = probability >= %.6g, the threshold eval_%s chose on '
                     '%s (%s)', record['value'], record['eval_name'],
                     record['calibration_pairs'] or 'its threshold pairs', record['ledger_entry'])
        return base.Decision(model_param_overrides={heads.SAME_PERSON_THRESHOLD: record['value']},
                             record=record)


KIND = registry.register(FacePairs())
