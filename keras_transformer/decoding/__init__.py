"""Decoding: greedy and beam search over any step function, and translation."""

from keras_transformer import _extras

_extras.require("tensorflow", "data")
_extras.require("tensorflow_text", "data")

from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.evaluation import Scores, evaluate, score_translations
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.translator import Translator

__all__ = ["Scores", "Translator", "beam_search", "evaluate", "greedy_search", "score_translations"]
