"""Losses (see `keras_transformer.training.losses`)."""

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy

__all__ = ["MaskedSparseCategoricalCrossentropy"]
