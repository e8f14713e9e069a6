"""Labelled image shards (input_fns/image_records.py); serving takes encoded images or pixels."""
import tensorflow as tf

from input_fns import image_records
from trainer.input_kinds import base, registry


class ImageClassification(base.RecordFileKind):
    name = 'image_classification'
    # The 'pixels' receiver alternative, serving_default's output: float pixels in, no decoding.
    signature_renames = {'pixels:serving_default': 'predict_pixels'}

    records = image_records

    def record_shape(self, spec):
        return spec.image_shape

    def format_options(self, training, options):
        return {'augment': training and options.augment}  # never at evaluation

    def serving_receiver_fn(self, spec, options):
        """serving_default takes encoded PNG/JPEG bytes; the 'pixels' alternative float pixels."""
        height, width, channels = spec.image_shape

        def decode(encoded):
            image = image_records.decode_any_image(encoded, channels)
            return tf.image.resize(image, [height, width]) * (1.0 / 255.0)

        def receiver_fn():
            image_bytes = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes')
            decoded = base.decode_batch(image_bytes, decode, spec.image_shape)
            # Feeding this tensor skips decoding: the float-pixels signature.
            pixels = tf.compat.v1.placeholder_with_default(
                decoded, [None, height, width, channels], name='pixels')
            return tf.estimator.export.ServingInputReceiver(
                features={'image': pixels},
                receiver_tensors={'image_bytes': image_bytes},
                receiver_tensors_alternatives={'pixels': {'pixels': pixels}})

        return receiver_fn


KIND = registry.register(ImageClassification())
