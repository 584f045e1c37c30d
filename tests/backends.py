"""Running the backend-neutral tests under every Keras backend.

`make test` runs tests/layers, tests/models and the loss, metric and
schedule tests a second and third time with `KERAS_BACKEND=jax` and
`KERAS_BACKEND=torch`; tests of TensorFlow-specific behaviour carry
`tensorflow_only`.
"""

import keras
import numpy as np
import pytest

BACKEND = keras.backend.backend()

tensorflow_only = pytest.mark.skipif(
    BACKEND != "tensorflow", reason=f"TensorFlow-specific; the backend is {BACKEND}"
)


def to_numpy(x):
    """A tensor of any backend (or a nest of them) as NumPy, in float32
    where it is a float of lower precision."""

    def one(t):
        # One tensor at a time: Keras converts a list of PyTorch tensors
        # with `np.array`, which a tensor on a GPU refuses.
        t = keras.ops.convert_to_numpy(t)
        return t.astype(np.float32) if t.dtype.kind == "f" and t.dtype.itemsize < 4 else t

    return keras.tree.map_structure(one, x)


def assert_allclose(actual, desired, **kwargs):
    """`np.testing.assert_allclose` for tensors of any backend and device."""
    np.testing.assert_allclose(to_numpy(actual), to_numpy(desired), **kwargs)


def assert_array_equal(actual, desired, **kwargs):
    """`np.testing.assert_array_equal` for tensors of any backend and device."""
    np.testing.assert_array_equal(to_numpy(actual), to_numpy(desired), **kwargs)


def full_float32_products():
    """Float32 matrix products at full precision on every backend: on
    recent GPUs, JAX and TensorFlow compute them in TensorFloat-32 (10-bit
    mantissas) by default, which the comparisons against NumPy references
    at 1e-5 would fail for a reason that is the hardware's, not the
    code's. No change on a CPU."""
    if BACKEND == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(False)
    elif BACKEND == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def _called_from_a_library(frame):
    """Whether the first caller above NumPy's and PyTorch's own frames is
    Keras (which moves a tensor to the host before converting it)."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("torch", "numpy", __name__)):
            return module.startswith("keras.")
        frame = frame.f_back
    return False


def refuse_host_conversion():
    """Makes PyTorch tensors refuse NumPy conversion outside Keras, as
    tensors on a GPU do ("can't convert cuda:0 device type tensor to
    numpy"), so that the suite on a CPU finds what would fail on a GPU:
    a test reads a tensor through `to_numpy`, not `np.asarray`."""
    import sys

    import torch

    def guard(method):
        def guarded(self, *args, **kwargs):
            if not _called_from_a_library(sys._getframe(1)):
                raise TypeError(
                    f"Tensor.{method.__name__} outside Keras: a tensor on a GPU refuses it; "
                    "read it with tests.backends.to_numpy"
                )
            return method(self, *args, **kwargs)

        guarded.__name__ = method.__name__
        return guarded

    torch.Tensor.__array__ = guard(torch.Tensor.__array__)
    torch.Tensor.numpy = guard(torch.Tensor.numpy)
