"""Training: schedules, losses, metrics, callbacks and the fit loop."""

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.schedules import WarmupSchedule

__all__ = ["MaskedAccuracy", "MaskedSparseCategoricalCrossentropy", "WarmupSchedule"]
