"""Moved to `keras_transformer.export.xla_cache`, which the corpus jobs use
too; importing it from here still works, with a `DeprecationWarning`."""

import warnings

from keras_transformer.export.xla_cache import cache_prefix, enable, entries

__all__ = ["enable", "entries", "cache_prefix"]

warnings.warn(
    "keras_transformer.serving.xla_cache moved to keras_transformer.export.xla_cache",
    DeprecationWarning,
    stacklevel=2,
)
