"""The step profile traces real steps; and what it saw backs benchmarks/flops.py: the first
convolution's input gradient, in the graph, never runs."""
from benchmarks import step_profile

GRADIENT = 'gradients/mnist_cnn/{}/Conv2D_grad/Conv2DBackpropInput'


def test_traced_steps_show_op_types_and_which_gradients_ran():
    traces = step_profile.traced_steps('mixed_bfloat16', False, batch_size=8, steps=2,
                                       warmup_steps=1)
    assert len(traces) == 2
    totals = step_profile.microseconds_by_op_type(traces)
    assert any('Conv2DBackpropFilter' in op_type for op_type in totals), totals
    assert all(micros >= 0 for micros in totals.values()) and sum(totals.values()) > 0
    ran = step_profile.nodes_that_ran(traces)
    assert GRADIENT.format('conv2d_1') in ran  # the second convolution's input gradient runs
    assert GRADIENT.format('conv2d') not in ran  # the first's is built, but never run
