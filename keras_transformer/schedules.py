"""Learning-rate schedules (see `keras_transformer.training.schedules`)."""

from keras_transformer.training.schedules import WarmupSchedule

__all__ = ["WarmupSchedule"]
