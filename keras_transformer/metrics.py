"""Metrics (see `keras_transformer.training.metrics`)."""

from keras_transformer.training.metrics import MaskedAccuracy

__all__ = ["MaskedAccuracy"]
