"""Benchmarks: `./run.sh bench` (python -m benchmarks.input_bench)."""

# trainer's __init__ sets what TensorFlow reads once, on import (store and oneDNN settings);
# benchmarks.machine imports TensorFlow before anything of trainer.
import trainer  # noqa: F401
