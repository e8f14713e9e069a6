"""Wires registered models to input_fns and runs them with tf.estimator.
Imports every service package; its own packages import only those on lower layers
(docs/architecture.md).
"""

from common import store_settings, tf_settings

# Before TensorFlow is imported: its GCS client and its choice of CPU kernels read them then.
store_settings.apply_defaults()
tf_settings.apply_defaults()
