"""Benchmarks: `./run.sh bench` (python -m benchmarks.input_bench)."""
