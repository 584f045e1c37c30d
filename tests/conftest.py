import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


# Seeded once: `tf.random.set_seed` clears TensorFlow's eager kernel cache,
# which frees tokenizer resources that module-scoped fixtures already made.
keras.utils.set_random_seed(1234)


@pytest.fixture(autouse=True)
def _policy():
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
