"""Mixed precision inside model_fns.

Under mixed_bfloat16 or mixed_float16 the Keras layers a model_fn builds compute in
16 bits and keep float32 variables; logits, losses and metrics stay float32
(`float32`), and float16 scales the loss so that small gradients do not vanish
(`loss_scaled`).
"""
import tensorflow as tf

PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')


def with_policy(model_fn, precision: str):
    """model_fn with the Keras mixed-precision policy `precision` set while it builds the graph."""
    if precision not in PRECISIONS:
        raise ValueError(f'precision {precision!r}: use one of {", ".join(PRECISIONS)}')
    if precision == 'float32':
        return model_fn

    def model_fn_with_policy(features, labels, mode, params):  # the Estimator reads these names
        previous = tf.keras.mixed_precision.global_policy()
        tf.keras.mixed_precision.set_global_policy(precision)
        try:
            return model_fn(features, labels, mode, params)
        finally:
            tf.keras.mixed_precision.set_global_policy(previous)

    return model_fn_with_policy


def float32(tensor):
    """Logits and other outputs that losses, metrics and exports read: float32 under any policy."""
    return tf.cast(tensor, tf.float32) if tensor.dtype != tf.float32 else tensor


def loss_scaled(optimizer):
    """A v1 optimizer with dynamic loss scaling under mixed_float16; as it is otherwise."""
    if tf.keras.mixed_precision.global_policy().compute_dtype != 'float16':
        return optimizer
    return tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer(optimizer, 'dynamic')
