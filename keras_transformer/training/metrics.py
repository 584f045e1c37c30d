"""Kept so that `keras_transformer.training.metrics` imports keep working; the
class lives in `keras_transformer.metrics`."""

from keras_transformer.metrics import MaskedAccuracy

__all__ = ["MaskedAccuracy"]
