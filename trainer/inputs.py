"""Which input_fn and which serving input feed each kind of model."""
import tensorflow as tf

from input_fns import image_records


def make_input_fn(spec, file_pattern, flag_name, training, batch_size, seed=None,
                  shuffle_buffer=10_000):
    if spec.input_kind == 'image_classification':
        return image_records.make_input_fn(
            file_pattern, spec.image_shape, batch_size, training, seed=seed,
            flag_name=flag_name, shuffle_buffer=shuffle_buffer)
    raise ValueError(f'model {spec.name}: no input_fn for input kind {spec.input_kind!r}')


def serving_input_receiver_fn(spec):
    """serving_default takes encoded PNG/JPEG bytes; the 'pixels' alternative takes float pixels."""
    if spec.input_kind != 'image_classification':
        raise ValueError(f'model {spec.name}: no serving input for input kind {spec.input_kind!r}')
    height, width, channels = spec.image_shape

    def decode(encoded):
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        return tf.image.resize(image, [height, width])  # float32, still 0..255

    def receiver_fn():
        image_bytes = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes')
        decoded = tf.map_fn(decode, image_bytes, fn_output_signature=tf.float32)
        decoded = tf.reshape(decoded, [-1, height, width, channels]) * (1.0 / 255.0)
        # Feeding this tensor skips decoding: the float-pixels signature.
        pixels = tf.compat.v1.placeholder_with_default(
            decoded, [None, height, width, channels], name='pixels')
        return tf.estimator.export.ServingInputReceiver(
            features={'image': pixels},
            receiver_tensors={'image_bytes': image_bytes},
            receiver_tensors_alternatives={'pixels': {'pixels': pixels}})

    return receiver_fn
