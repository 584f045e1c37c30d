"""Checkpoints of other toolkits, in and out: Marian (OPUS-MT) in the
Hugging Face format.

Names load on first use."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {"import_marian": "marian", "read_marian": "marian"},
    requires=(("tensorflow", "data"), ("sentencepiece", "data")),
)
