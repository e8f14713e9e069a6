"""A CPU-heavy per-example function in plain Python, as users write them: loops, no NumPy kernels.

Kept free of TensorFlow so that worker processes importing it stay light.
"""
import numpy as np

SIZE = 24


def blurred_example(index: int):
    """A SIZE x SIZE image made from the index, then a 3x3 box blur in Python loops (~1 ms)."""
    state = (index * 2654435761) % 2 ** 32
    pixels = []
    for _ in range(SIZE * SIZE):
        state = (1103515245 * state + 12345) % 2 ** 31
        pixels.append(state / 2 ** 31)
    blurred = []
    for y in range(SIZE):
        for x in range(SIZE):
            total, count = 0.0, 0
            for yy in range(max(y - 1, 0), min(y + 2, SIZE)):
                for xx in range(max(x - 1, 0), min(x + 2, SIZE)):
                    total += pixels[yy * SIZE + xx]
                    count += 1
            blurred.append(total / count)
    return np.asarray(blurred, np.float32).reshape(SIZE, SIZE), index % 10
