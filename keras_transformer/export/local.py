"""Translating with an export on this machine, through the serving loader."""

import os

import numpy as np

from keras_transformer.export.servable import versions
from keras_transformer.export.session_model import SessionModel


def resolve_version_dir(model_path, version=None):
    """`exports/translator` (+ version, default latest) or a version dir."""
    if os.path.exists(os.path.join(model_path, "saved_model.pb")):
        return model_path
    available = versions(model_path)
    if not available:
        raise FileNotFoundError(f"No SavedModel versions under {model_path}")
    chosen = available[-1] if version is None else version
    if chosen not in available:
        raise FileNotFoundError(
            f"Version {chosen} not found under {model_path}; available: {available}"
        )
    return os.path.join(model_path, str(chosen))


def translate_with_savedmodel(
    model_path, sentences, signature="serving_default", version=None, plot_attention=None
):
    """Translates `sentences` with an export; returns printable lines."""
    model = SessionModel(resolve_version_dir(model_path, version))
    try:
        text = np.array([s.encode("utf-8") for s in sentences], dtype=object)
        outputs = model.run(signature, {"text": text})
        if plot_attention:
            from keras_transformer.export.attention_plot import plot_cross_attention

            plot_cross_attention(model, sentences[0], plot_attention)
    finally:
        model.close()
    if "translations" in outputs:
        return [" ||| ".join(t.decode("utf-8") for t in row) for row in outputs["translations"]]
    return [t.decode("utf-8") for t in outputs["translation"]]
