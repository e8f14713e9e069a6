"""Benchmarks: `./run.sh bench` (python -m benchmarks.input_bench)."""

from common import store_settings, tf_settings

# Before TensorFlow is imported (benchmarks.machine imports it before trainer): as trainer/ does.
store_settings.apply_defaults()
tf_settings.apply_defaults()
