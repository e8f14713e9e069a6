"""The bench on a GPU: utilization from nvidia-smi, float16 rows, the GPU's targets.

No GPU is needed: nvidia-smi is stood in for by a script that prints what the real one
prints for `--query-gpu=utilization.gpu --format=csv,noheader,nounits --loop-ms=N`.
"""
import time

from benchmarks import bench_targets, gpu_use, precision_bench


def test_samples_are_the_lines_that_are_numbers():
    assert gpu_use.parse_samples('57\n[N/A]\n 60 \nNVIDIA-SMI has failed\n') == [57.0, 60.0]


def test_the_hook_samples_from_the_end_of_warm_up_to_the_end(tmp_path):
    """The stand-in prints four samples, says so in a file, then waits to be stopped: the test
    waits for that file rather than for a time a loaded machine may not keep."""
    arguments, printed = tmp_path / 'arguments', tmp_path / 'printed'
    fake = tmp_path / 'nvidia-smi'
    fake.write_text(f'#!/bin/sh\necho "$@" > {arguments}\n'
                    f'echo 40; echo 60; echo 40; echo 60; touch {printed}; exec sleep 60\n')
    fake.chmod(0o755)
    hook = gpu_use.UtilizationHook(after_steps=2, interval_ms=20, command=str(fake))
    hook.after_run(None, None)
    assert hook.process is None  # still warming up
    hook.after_run(None, None)
    deadline = time.monotonic() + 60
    while not printed.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    hook.end(None)
    assert hook.process.returncode is not None
    assert hook.samples == [40.0, 60.0, 40.0, 60.0] and hook.mean() == 50.0
    assert arguments.read_text().split() == [*gpu_use.QUERY, '--loop-ms=20']


def test_a_run_that_never_left_warm_up_has_no_utilization():
    hook = gpu_use.UtilizationHook(after_steps=5, command='/nonexistent/nvidia-smi')
    hook.after_run(None, None)
    hook.end(None)
    assert hook.mean() is None


def test_on_a_gpu_float16_rows_and_the_gpu_input_target():
    assert [suffix for suffix, *_ in precision_bench.settings(gpu=False)] == [
        'float32', 'bfloat16', 'xla', 'bfloat16_xla']
    assert 'precision.float16' in precision_bench.faster_keys(gpu=True)
    assert 'precision.float16' not in precision_bench.faster_keys(gpu=False)
    assert [precision_bench.compute_dtype(key) for key in (
        'precision.float16', 'precision.bfloat16_xla', 'precision.xla')] == [
        'float16', 'bfloat16', 'float32']

    def estimator_target(gpu):
        return next(target for what, _, _, target, _ in bench_targets.targets(200, gpu)
                    if what.startswith('Estimator: input_fn'))

    assert (estimator_target(False), estimator_target(True)) == (0.97, 0.95)
