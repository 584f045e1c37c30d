"""Models composed from `keras_transformer.layers`."""

from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import Transformer

__all__ = ["PRESETS", "Transformer"]
