"""Models composed from `keras_transformer.layers`."""

from keras_transformer.models.diagnostics import (
    cross_attention_entropy,
    encoder_position_similarity,
)
from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import Transformer

__all__ = [
    "PRESETS",
    "Transformer",
    "cross_attention_entropy",
    "encoder_position_similarity",
]
