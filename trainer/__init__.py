"""Wires registered models to input_fns and runs them with tf.estimator."""
