"""Models composed from `keras_transformer.layers`.

Names load on first use (`keras_transformer`'s docstring says when the
serializable classes are registered).
"""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "PRESETS": "presets",
        "Transformer": "transformer",
        "cross_attention_entropy": "diagnostics",
        "encoder_position_similarity": "diagnostics",
    },
)
