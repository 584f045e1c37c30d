"""Kept so that `keras_transformer.training.schedules` imports keep working; the
class lives in `keras_transformer.schedules`."""

from keras_transformer.schedules import WarmupSchedule

__all__ = ["WarmupSchedule"]
