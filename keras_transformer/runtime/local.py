"""Translating with an export on this machine, through the serving loader."""

import os

import numpy as np

from keras_transformer._validation import check_positive_int
from keras_transformer._version_folders import versions
from keras_transformer.runtime.session_model import SessionModel
from keras_transformer.runtime.signatures import PREFIX_SIGNATURES


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
    model_path, sentences, signature="serving_default", version=None, plot_attention=None,
    batch_size=64, target_prefix=None,
):  # fmt: skip
    """Translates `sentences` with an export, `batch_size` at a time (a
    file of any length runs in the memory of one batch); returns printable
    lines, in order.

    `target_prefix`: a string every translation continues (through the
    export's `translate_prefix`, or `translate_prefix_nbest` for
    `signature="translate_nbest"`); None translates freely.
    """
    check_positive_int("batch_size", batch_size)
    if target_prefix is not None:
        if signature not in PREFIX_SIGNATURES:
            raise ValueError(
                f"--target-prefix goes with --signature {' or '.join(PREFIX_SIGNATURES)}; "
                f"received {signature}"
            )
        signature = PREFIX_SIGNATURES[signature]
    model = SessionModel(resolve_version_dir(model_path, version))
    lines = []
    try:
        for begin in range(0, len(sentences), batch_size):
            chunk = sentences[begin : begin + batch_size]
            text = np.array([s.encode("utf-8") for s in chunk], dtype=object)
            inputs = {"text": text}
            if target_prefix is not None:
                inputs["target_prefix"] = np.array([target_prefix.encode("utf-8")] * len(chunk),
                                                   dtype=object)  # fmt: skip
            outputs = model.run(signature, inputs)
            if "translations" in outputs:
                lines += [" ||| ".join(t.decode("utf-8") for t in row)
                          for row in outputs["translations"]]  # fmt: skip
            else:
                lines += [t.decode("utf-8") for t in outputs["translation"]]
        if plot_attention and sentences:
            from keras_transformer.runtime.attention_plot import plot_cross_attention

            plot_cross_attention(model, sentences[0], plot_attention)
    finally:
        model.close()
    return lines


def score_with_savedmodel(model_path, sources, targets, version=None, batch_size=64):
    """The export's `score` of each target given its source.

    Returns:
        `(log_probs, lengths)`: NumPy float32 and int32 arrays, one entry a
        pair, in order.
    """
    check_positive_int("batch_size", batch_size)
    if len(sources) != len(targets):
        raise ValueError(
            f"One target a source: received {len(sources)} sources and {len(targets)} targets"
        )
    model = SessionModel(resolve_version_dir(model_path, version))
    log_probs, lengths = [], []
    try:
        for begin in range(0, len(sources), batch_size):
            inputs = {
                name: np.array(
                    [s.encode("utf-8") for s in lines[begin : begin + batch_size]], dtype=object
                )
                for name, lines in (("text", sources), ("translation", targets))
            }
            outputs = model.run("score", inputs)
            log_probs.append(outputs["log_prob"])
            lengths.append(outputs["length"])
    finally:
        model.close()
    if not log_probs:
        return np.zeros([0], np.float32), np.zeros([0], np.int32)
    return np.concatenate(log_probs), np.concatenate(lengths)
