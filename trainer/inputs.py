"""Which input_fn and which serving input feed each kind of model."""
import tensorflow as tf

from input_fns import csv_records, face_records, image_records, pipeline


def face_geometry(spec, crop_fraction):
    height, _, channels = spec.image_shape
    return face_records.FaceGeometry(image_size=height, channels=channels,
                                     crop_fraction=crop_fraction)


def make_input_fn(spec, file_pattern, flag_name, training, batch_size, seed=0, options=None):
    """options: the input flags (shuffle_buffer, pair_sampler, same_fraction, face_crop_fraction)."""
    options = options or {}
    if spec.input_kind == 'image_classification':
        return image_records.make_input_fn(
            file_pattern, spec.image_shape, batch_size, training, seed=seed, flag_name=flag_name,
            shuffle_buffer=options.get('shuffle_buffer', 10_000))
    if spec.input_kind == 'face_pairs':
        geometry = face_geometry(spec, options.get('face_crop_fraction', 0.5))
        if training:
            return face_records.make_train_input_fn(
                file_pattern, geometry, batch_size, seed=seed,
                same_fraction=options.get('same_fraction', 0.5),
                sampler=options.get('pair_sampler', 'graph'), flag_name=flag_name)
        return face_records.make_eval_input_fn(file_pattern, geometry, batch_size, flag_name)
    if spec.input_kind == 'csv_features':
        return csv_records.make_input_fn(
            file_pattern, spec.num_features, batch_size, training, seed=seed, flag_name=flag_name,
            shuffle_buffer=options.get('shuffle_buffer', 10_000))
    raise ValueError(f'model {spec.name}: no input_fn for input kind {spec.input_kind!r}')


def _record_format(spec):
    """(parse_batch, reader) for the kinds that the shared record pipeline reads, else None."""
    if spec.input_kind == 'image_classification':
        return image_records.parse_batch_fn(spec.image_shape), tf.data.TFRecordDataset
    if spec.input_kind == 'csv_features':
        return csv_records.parse_batch_fn(spec.num_features), tf.data.TextLineDataset
    return None


def training_input_stages(spec, file_pattern, flag_name, batch_size, seed=0, options=None):
    """The training input_fn, and its pipeline cut short after each earlier stage.

    [(stage, function returning a dataset)], each stage adding to the one before;
    the last is the input_fn itself. Checks the files first.
    """
    options = options or {}
    input_fn = make_input_fn(spec, file_pattern, flag_name, True, batch_size, seed, options)
    stages, last_stage = [], 'the input_fn'
    record_format = _record_format(spec)
    if record_format:
        parse_batch, reader = record_format
        files = pipeline.list_record_files(file_pattern, flag_name)

        def up_to(parse):
            return lambda: pipeline.process_record_dataset(
                files, parse, batch_size, True, seed=seed, reader=reader, prefetch=False,
                shuffle_buffer=options.get('shuffle_buffer', 10_000))

        stages = [('read: interleave, shuffle, batch', up_to(None)),
                  ('+ parse the batch', up_to(parse_batch))]
        last_stage = '+ prefetch: the input_fn'
    elif spec.input_kind == 'face_pairs' and options.get('pair_sampler', 'graph') == 'graph':
        stages = face_records.sampled_pair_stages(
            file_pattern, face_geometry(spec, options.get('face_crop_fraction', 0.5)), batch_size,
            seed, options.get('same_fraction', 0.5), flag_name)
        last_stage = '+ augment, prefetch: the input_fn'
    return stages + [(last_stage, input_fn)]


def _decode_batch(encoded, decode_one, shape):
    decoded = tf.map_fn(decode_one, encoded, fn_output_signature=tf.float32)
    return tf.reshape(decoded, [-1] + list(shape))


def serving_input_receiver_fn(spec, options=None):
    options = options or {}
    if spec.input_kind == 'image_classification':
        return _image_receiver_fn(spec)
    if spec.input_kind == 'face_pairs':
        return _face_pair_receiver_fn(spec, face_geometry(spec, options.get('face_crop_fraction', 0.5)))
    if spec.input_kind == 'csv_features':
        return _csv_receiver_fn(spec)
    raise ValueError(f'model {spec.name}: no serving input for input kind {spec.input_kind!r}')


def _image_receiver_fn(spec):
    """serving_default takes encoded PNG/JPEG bytes; the 'pixels' alternative takes float pixels."""
    height, width, channels = spec.image_shape

    def decode(encoded):
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        return tf.image.resize(image, [height, width]) * (1.0 / 255.0)

    def receiver_fn():
        image_bytes = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes')
        decoded = _decode_batch(image_bytes, decode, spec.image_shape)
        # Feeding this tensor skips decoding: the float-pixels signature.
        pixels = tf.compat.v1.placeholder_with_default(
            decoded, [None, height, width, channels], name='pixels')
        return tf.estimator.export.ServingInputReceiver(
            features={'image': pixels},
            receiver_tensors={'image_bytes': image_bytes},
            receiver_tensors_alternatives={'pixels': {'pixels': pixels}})

    return receiver_fn


def _face_pair_receiver_fn(spec, geometry):
    """serving_default takes two batches of encoded photos; the 'single' alternative takes one."""
    def receiver_fn():
        bytes_a = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes_a')
        bytes_b = tf.compat.v1.placeholder(tf.string, [None], name='image_bytes_b')
        decode = lambda encoded: face_records.decode_any_face(encoded, geometry)  # noqa: E731
        features = {'image_a': _decode_batch(bytes_a, decode, spec.image_shape),
                    'image_b': _decode_batch(bytes_b, decode, spec.image_shape)}
        return tf.estimator.export.ServingInputReceiver(
            features=features,
            receiver_tensors={'image_bytes_a': bytes_a, 'image_bytes_b': bytes_b},
            receiver_tensors_alternatives={'single': {'image_bytes': bytes_a}})

    return receiver_fn


def _csv_receiver_fn(spec):
    """serving_default takes 'inputs', float32 [N, num_features]: the CSV columns before the label."""
    def receiver_fn():
        inputs = tf.compat.v1.placeholder(tf.float32, [None, spec.num_features],
                                          name=csv_records.FEATURE_KEY)
        return tf.estimator.export.ServingInputReceiver({csv_records.FEATURE_KEY: inputs},
                                                        {csv_records.FEATURE_KEY: inputs})

    return receiver_fn
