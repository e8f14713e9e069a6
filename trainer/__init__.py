"""Wires registered models to input_fns and runs them with tf.estimator."""

from common import store_settings

store_settings.apply_defaults()  # before TensorFlow is imported: its GCS client reads them then
