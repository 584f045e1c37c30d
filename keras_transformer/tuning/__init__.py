"""keras-tuner integration: the search space, BLEU objective and the search driver.

Names load on first use; importing the package checks the `tuning` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "BleuCallback": "bleu_callback",
        "DEFAULT_SPACE": "space",
        "TransformerHyperModel": "hypermodel",
        "TuneConfig": "config",
    },
    requires=(("keras_tuner", "tuning"), ("tensorflow", "tuning")),
)
