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
    x = keras.ops.convert_to_numpy(x)
    return x.astype(np.float32) if x.dtype.kind == "f" and x.dtype.itemsize < 4 else x
