"""What a SavedModel and --mode=predict do with inputs they cannot use (issue 11, cases 5 and 7)."""
import json

import numpy as np
import pytest
import tensorflow as tf

from common.errors import op_error_summary
from helpers import cmyk_jpeg, run_module
from models import registry
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions

# A 1x1 GIF and a 2x2 24-bit BMP, written out by hand: TensorFlow encodes neither.
GIF_1X1 = (b'GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00'
           b'\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;')


def bmp_2x2():
    pixels = b'\xff\xff\xff\x00\x00\x00\x00\x00' * 2  # two rows: BGR BGR + 2 bytes of padding
    header = b'BM' + (54 + len(pixels)).to_bytes(4, 'little') + b'\0\0\0\0' + (54).to_bytes(4, 'little')
    info = ((40).to_bytes(4, 'little') + (2).to_bytes(4, 'little') + (2).to_bytes(4, 'little')
            + (1).to_bytes(2, 'little') + (24).to_bytes(2, 'little') + bytes(24))
    return header + info + pixels


@pytest.fixture(scope='module')
def saved_model(trained_model, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp('serving') / 'exports'
    exported = run_module('trainer.main', '--mode=export', f'--model_dir={trained_model}',
                          f'--export_dir={export_dir}')
    return json.loads(exported.stdout)['saved_model']


def test_predict_reads_every_format_the_check_accepts(saved_model, tmp_path):
    paths = {'gif': GIF_1X1, 'bmp': bmp_2x2(), 'jpg': cmyk_jpeg(),
             'png': tf.io.encode_png(np.full((1, 1, 3), 200, np.uint8)).numpy()}
    for suffix, data in paths.items():
        (tmp_path / f'image.{suffix}').write_bytes(data)
    files = [str(tmp_path / f'image.{suffix}') for suffix in paths]
    result = run_module('trainer.main', '--mode=predict', f'--saved_model={saved_model}', *files)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row['image'] for row in rows] == files
    assert all(len(row['probabilities']) == 10 for row in rows)


def test_saved_model_says_what_is_wrong_with_an_empty_batch(saved_model):
    serve = tf.saved_model.load(saved_model).signatures['serving_default']
    with pytest.raises(tf.errors.InvalidArgumentError, match='image_bytes is empty') as raised:
        serve(image_bytes=tf.constant([], tf.string))
    # The one line the CLI shows is the cause, not a stack frame of the caller.
    assert op_error_summary(raised.value).startswith('assertion failed: [image_bytes is empty')


def test_face_pair_receiver_refuses_batches_of_different_sizes():
    spec = registry.get('face_diff')
    photo = tf.io.encode_jpeg(np.zeros((64, 64, 1), np.uint8)).numpy()
    with tf.Graph().as_default():
        receiver = input_kinds.for_model(spec).serving_receiver_fn(spec, InputOptions())()
        with tf.compat.v1.Session() as session:
            feed = {receiver.receiver_tensors['image_bytes_a']: [photo, photo],
                    receiver.receiver_tensors['image_bytes_b']: [photo]}
            with pytest.raises(tf.errors.InvalidArgumentError, match='image_bytes_a.*image_bytes_b'):
                session.run(receiver.features, feed)
            feed[receiver.receiver_tensors['image_bytes_b']] = [photo, photo]
            assert session.run(receiver.features, feed)['image_a'].shape[0] == 2
