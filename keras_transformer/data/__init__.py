"""Data: corpora (`synthetic`, `parallel:`, `tfds:`), tokenizers, tf.data pipeline."""

from keras_transformer import _extras

_extras.require("tensorflow", "data")
_extras.require("tensorflow_text", "data")

from keras_transformer.data.pipeline import LengthStats, length_stats, make_batches, tokenize_pairs
from keras_transformer.data.sources import (
    CorpusStats,
    load_dataset,
    parse_spec,
    read_parallel_files,
)
from keras_transformer.data.synthetic import generate_pairs
from keras_transformer.data.tokenizer import END_ID, PAD_ID, START_ID, UNK_ID, SubwordTokenizer

__all__ = [
    "CorpusStats",
    "END_ID",
    "LengthStats",
    "PAD_ID",
    "START_ID",
    "SubwordTokenizer",
    "UNK_ID",
    "generate_pairs",
    "length_stats",
    "load_dataset",
    "make_batches",
    "parse_spec",
    "read_parallel_files",
    "tokenize_pairs",
]
