"""Decoding: greedy and beam search over any step function, and translation."""

from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.greedy import greedy_search

__all__ = ["beam_search", "greedy_search"]
