"""keras_transformer: Keras 3 layers and a servable Transformer for translation.

Sub-packages: `layers`, `models`, `schedules`, `losses`, `metrics`, `data`,
`training`, `decoding`, `export`, `tuning`.
"""

import os

# Keras 3 on TensorFlow; set before Keras is imported anywhere.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer import layers  # noqa: E402
from keras_transformer import losses  # noqa: E402
from keras_transformer import metrics  # noqa: E402
from keras_transformer import models  # noqa: E402
from keras_transformer import schedules  # noqa: E402

__version__ = "0.1.0"

__all__ = ["layers", "losses", "metrics", "models", "schedules", "__version__"]
