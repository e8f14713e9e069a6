"""Labelled image shards (input_fns/images/image_records.py); serving takes encoded images or pixels.

A model with a fixed shape (mnist_cnn) names it in its spec; one built from its data
(image_classifier) takes `prepare images`' schema: the shape, and how serving fits a photo of
another size (its 'resize'), as prepare fitted the training photos.
"""
import numpy as np
import tensorflow as tf

from input_fns.images import image_augment, image_records
from trainer.input_kinds import base, registry


# The Classify API's tf.Example: the image file's bytes (PNG, JPEG...) under this feature.
EXAMPLE_IMAGE_KEY = 'image/encoded'


def image_shape(spec):
    """[height, width, channels]: the data's (prepare images' schema), or the model's own."""
    return tuple(spec.schema['image_shape']) if spec.schema else tuple(spec.image_shape)


def serving_decoder(spec):
    """Encoded image bytes -> float32 [H, W, C] in [0, 1], as the model's training images were made."""
    shape = image_shape(spec)
    height, width, channels = shape
    resize = spec.schema and spec.schema['resize']

    def decode(encoded):
        image = image_records.decode_any_image(encoded, channels)
        if resize:  # prepare images' own fitting, to the same uint8 pixels
            return tf.cast(image_records.fit_image(image, shape, resize), tf.float32) * (1.0 / 255.0)
        return tf.image.resize(image, [height, width]) * (1.0 / 255.0)

    return decode


class ImageClassification(base.RecordFileKind):
    name = 'image_classification'
    # The 'pixels' receiver alternative, serving_default's output: float pixels in, no decoding.
    # The 'example' alternative's classify output is the classify signature; the others made
    # from a receiver and an output that do not belong together are dropped.
    signature_renames = {'pixels:serving_default': 'predict_pixels', 'classify': None,
                         'example:classify': 'classify', 'example:serving_default': None}

    records = image_records
    own_options = ('augment_flip',) + base.AUGMENT_TUNING
    records_are = 'image records'

    def record_shape(self, spec):
        return image_shape(spec)

    def format_options(self, training, options):
        # never at evaluation
        affine = image_augment.DIGITS.stronger(
            options.augment_strength, options.augment_shear, options.augment_elastic)
        return {'affine': affine if training and options.augment else None,
                'flip': training and options.augment_flip}

    def serving_receiver_fn(self, spec, options):
        """serving_default takes encoded PNG/JPEG/GIF/BMP bytes of any size; the 'pixels'
        alternative float pixels; the 'example' alternative serialized tf.Example protos holding
        the encoded bytes."""
        shape = image_shape(spec)
        decode = serving_decoder(spec)

        def receiver_fn():
            examples = tf.compat.v1.placeholder(tf.string, [None], name='examples')
            parsed = tf.io.parse_example(
                examples, {EXAMPLE_IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)})
            # Each placeholder_with_default, when fed, cuts off what is upstream of it: feeding
            # image_bytes skips parsing examples; feeding pixels skips decoding too.
            image_bytes = tf.compat.v1.placeholder_with_default(
                parsed[EXAMPLE_IMAGE_KEY], [None], name='image_bytes')
            decoded = base.decode_batch(image_bytes, decode, shape)
            pixels = tf.compat.v1.placeholder_with_default(decoded, [None, *shape], name='pixels')
            return tf.estimator.export.ServingInputReceiver(
                features={'image': pixels},
                receiver_tensors={'image_bytes': image_bytes},
                receiver_tensors_alternatives={'pixels': {'pixels': pixels},
                                               'example': {'examples': examples}})

        return receiver_fn

    def example_schemas(self):
        """`prepare images`' schema, small: image_classifier's metrics without any data."""
        return [{'kind': 'images', 'image_shape': [8, 8, 1], 'classes': ['a', 'b', 'c'],
                 'resize': 'stretch'}]

    def warmup_inputs(self, spec, options):
        shape = image_shape(spec)
        png = base.synthetic_png(*shape)
        return {'image_bytes': np.array([png], object),
                'pixels': np.zeros([1, *shape], np.float32),
                tf.saved_model.CLASSIFY_INPUTS: np.array([image_example(png)], object)}


def image_example(encoded: bytes) -> bytes:
    """A serialized tf.Example as the classify signature (TF Serving's Classify API) takes it."""
    return tf.train.Example(features=tf.train.Features(feature={
        EXAMPLE_IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded]))
    })).SerializeToString()


KIND = registry.register(ImageClassification())
