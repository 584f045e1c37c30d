"""Training: schedules, losses, metrics, callbacks, strategies and the fit loop."""

from keras_transformer import _extras

_extras.require("tensorflow", "data")
_extras.require("tensorflow_text", "data")

from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.schedules import WarmupSchedule
from keras_transformer.training.averaging import average_checkpoints, average_weights
from keras_transformer.training.config import TrainConfig
from keras_transformer.training.epoch_weights import EpochWeights
from keras_transformer.training.run_directory import RunDirectory, load_run
from keras_transformer.training.time_limit import TimeLimit
from keras_transformer.training.trainer import build_model, set_precision, train

__all__ = [
    "EpochWeights",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "RunDirectory",
    "TimeLimit",
    "TrainConfig",
    "WarmupSchedule",
    "average_checkpoints",
    "average_weights",
    "build_model",
    "load_run",
    "set_precision",
    "train",
]
