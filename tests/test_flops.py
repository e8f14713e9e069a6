"""Training FLOPs per example: the profiler's count on the training graph and the count from
the layer shapes agree, and both agree with the MNIST CNN's arithmetic done by hand."""
import pytest

from benchmarks import flops

# conv 5x5x1->32 on 28x28, conv 5x5x32->64 on 14x14, dense 3136->1024, dense 1024->10.
FIRST_CONV_MACS = 28 * 28 * 32 * 25
MNIST_CNN_MACS = FIRST_CONV_MACS + 14 * 14 * 64 * 25 * 32 + 7 * 7 * 64 * 1024 + 1024 * 10


@pytest.mark.parametrize('model_name, batch_size', [('mnist_cnn', 100), ('face_embedding', 8)])
def test_profiler_and_layer_shapes_count_the_same_training_flops(model_name, batch_size):
    by_type = flops.graph_float_ops(model_name, batch_size)
    exact = flops.exact_training_flops(model_name, batch_size)
    # The convolutions and matmuls, forward and both gradients, to the FLOP.
    assert flops.dense_math_flops(by_type) == exact * batch_size
    # The first convolution's input gradient is left out: the step never runs it.
    assert by_type['Conv2DBackpropInput'] < by_type['Conv2D'] == by_type['Conv2DBackpropFilter']
    # The rest (bias, pooling, batch norm...) is small beside them.
    assert exact * batch_size < sum(by_type.values()) < 1.01 * exact * batch_size


def test_mnist_cnn_count_is_the_arithmetic_by_hand():
    assert flops.exact_training_flops('mnist_cnn', 100) == 2 * (
        3 * MNIST_CNN_MACS - FIRST_CONV_MACS) == 82_049_024
