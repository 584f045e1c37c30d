"""Kept so that `keras_transformer.training.losses` imports keep working; the
class lives in `keras_transformer.losses`."""

from keras_transformer.losses import MaskedSparseCategoricalCrossentropy

__all__ = ["MaskedSparseCategoricalCrossentropy"]
