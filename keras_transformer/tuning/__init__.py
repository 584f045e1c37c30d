"""keras-tuner integration: the search space, BLEU objective and the search driver."""

from keras_transformer import _extras

_extras.require("keras_tuner", "tuning")
_extras.require("tensorflow", "tuning")

from keras_transformer.tuning.bleu_callback import BleuCallback
from keras_transformer.tuning.config import TuneConfig
from keras_transformer.tuning.hypermodel import DEFAULT_SPACE, TransformerHyperModel

__all__ = ["BleuCallback", "DEFAULT_SPACE", "TransformerHyperModel", "TuneConfig"]
