"""Labelled image shards (input_fns/image_records.py); serving takes encoded images or pixels."""
import numpy as np
import tensorflow as tf

from input_fns import image_records
from trainer.input_kinds import base, registry


# The Classify API's tf.Example: the image file's bytes (PNG, JPEG...) under this feature.
EXAMPLE_IMAGE_KEY = 'image/encoded'


class ImageClassification(base.RecordFileKind):
    name = 'image_classification'
    # The 'pixels' receiver alternative, serving_default's output: float pixels in, no decoding.
    # The 'example' alternative's classify output is the classify signature; the others made
    # from a receiver and an output that do not belong together are dropped.
    signature_renames = {'pixels:serving_default': 'predict_pixels', 'classify': None,
                         'example:classify': 'classify', 'example:serving_default': None}

    records = image_records

    def record_shape(self, spec):
        return spec.image_shape

    def format_options(self, training, options):
        return {'augment': training and options.augment}  # never at evaluation

    def serving_receiver_fn(self, spec, options):
        """serving_default takes encoded PNG/JPEG bytes; the 'pixels' alternative float pixels;
        the 'example' alternative serialized tf.Example protos holding the encoded bytes."""
        height, width, channels = spec.image_shape

        def decode(encoded):
            image = image_records.decode_any_image(encoded, channels)
            return tf.image.resize(image, [height, width]) * (1.0 / 255.0)

        def receiver_fn():
            examples = tf.compat.v1.placeholder(tf.string, [None], name='examples')
            parsed = tf.io.parse_example(
                examples, {EXAMPLE_IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)})
            # Each placeholder_with_default, when fed, cuts off what is upstream of it: feeding
            # image_bytes skips parsing examples; feeding pixels skips decoding too.
            image_bytes = tf.compat.v1.placeholder_with_default(
                parsed[EXAMPLE_IMAGE_KEY], [None], name='image_bytes')
            decoded = base.decode_batch(image_bytes, decode, spec.image_shape)
            pixels = tf.compat.v1.placeholder_with_default(
                decoded, [None, height, width, channels], name='pixels')
            return tf.estimator.export.ServingInputReceiver(
                features={'image': pixels},
                receiver_tensors={'image_bytes': image_bytes},
                receiver_tensors_alternatives={'pixels': {'pixels': pixels},
                                               'example': {'examples': examples}})

        return receiver_fn

    def warmup_inputs(self, spec, options):
        png = base.synthetic_png(*spec.image_shape)
        return {'image_bytes': np.array([png], object),
                'pixels': np.zeros([1, *spec.image_shape], np.float32),
                tf.saved_model.CLASSIFY_INPUTS: np.array([image_example(png)], object)}


def image_example(encoded: bytes) -> bytes:
    """A serialized tf.Example as the classify signature (TF Serving's Classify API) takes it."""
    return tf.train.Example(features=tf.train.Features(feature={
        EXAMPLE_IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded]))
    })).SerializeToString()


KIND = registry.register(ImageClassification())
