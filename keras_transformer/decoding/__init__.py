"""Decoding: greedy and beam search over any step function, and translation.

Names load on first use; importing the package checks the `data` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "GenerationConfig": "generation_config",
        "Prefix": "_common",
        "Rules": "_common",
        "Scores": "evaluation",
        "ShapeRunner": "shape_runner",
        "Translator": "translator",
        "beam_search": "beam_search",
        "evaluate": "evaluation",
        "greedy_search": "greedy",
        "sample_search": "sampling",
        "score_translations": "evaluation",
    },
    requires=(("tensorflow", "data"), ("tensorflow_text", "data")),
)
