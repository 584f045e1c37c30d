"""What an XLA-compiled export records: its shapes, and warmup for each.

An export written with `jit_compile=True` runs its id-level work in
programs compiled per input shape (see `Translator`). This module writes
`assets.extra/keras_transformer.json`, which says so (TF Serving needs
`--xla_cpu_compilation_enabled=true` for it) and lists the compiled shapes,
and makes the warmup requests that run every program once, so that no
client request compiles after the version is AVAILABLE.
"""

import json
import os

from keras_transformer.export.warmup import DEFAULT_SENTENCES, predict_request
from keras_transformer.runtime.export_info import INFO_PATH, XLA_FLAG

# Signatures whose compiled program another one already runs: the beam
# search of `serving_default` is the one of `translate_nbest` and
# `attention`.
_SAME_PROGRAM = {
    "translate_nbest": "serving_default",
    "attention": "serving_default",
    "translate_prefix_nbest": "translate_prefix",
}


def compiled_info(translator):
    """The description of a compiled export's programs, as a dict."""
    searches = translator.compiled_searches
    return {
        "jit_compile": True,
        "tf_serving_flag": XLA_FLAG,
        "batch_sizes": list(translator.batch_sizes),
        # With split_batches, a chunk of two rows or more runs as two
        # programs at once, one per half.
        "split_batches": translator.shapes.split_batches,
        "program_batch_sizes": translator.program_batch_sizes,
        "lengths": list(translator.lengths),
        "programs": len(translator.compiled_shapes) * len(searches),
        "compiled": searches,
    }


def write_export_info(export_dir, info):
    path = os.path.join(export_dir, INFO_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    return path


def text_of_length(tokenizer, tokens, words=None):
    """Text that `tokenizer` cuts into exactly `tokens` pieces, or as close
    below as words allow.

    Args:
        tokenizer: a `SubwordTokenizer`.
        tokens: the number of pieces wanted.
        words: the words to repeat (default: the warmup sentences').

    Returns:
        `(text, pieces)`.
    """
    words = words or " ".join(DEFAULT_SENTENCES).split()
    text, count = "", 0
    for i in range(tokens * 4):
        candidate = f"{text} {words[i % len(words)]}".strip()
        pieces = int(tokenizer.tokenize([candidate]).row_lengths()[0])
        if pieces > tokens:
            break
        text, count = candidate, pieces
        if count == tokens:
            break
    return text, count


def compiled_shape_requests(translator, signature_inputs):
    """Warmup requests that run every compiled program once.

    For each compiled length, a text whose tokens (with the end token) fill
    it, sent as a batch of each compiled size to one signature of each
    program (`translate_nbest` and `attention` run `serving_default`'s);
    `score` gets an empty translation, so that the text sets its length.

    Raises:
        ValueError: the tokenizer cannot make a text that reaches one of
            the lengths (then requests of that length would compile).
    """
    requests, previous = [], 0
    for length in translator.lengths:
        text, pieces = text_of_length(translator.source_tokenizer, length - 1)
        if pieces + 1 <= previous:
            raise ValueError(
                f"Warmup cannot reach the compiled length {length}: the longest text "
                f"it makes has {pieces} tokens"
            )
        previous = length
        for signature, inputs in signature_inputs.items():
            if signature in _SAME_PROGRAM:
                continue
            for size in translator.batch_sizes:
                values = {name: [text] * size for name in inputs}
                if "translation" in values:
                    values["translation"] = [""] * size
                if "target_prefix" in values:  # the prefix's width is fixed
                    values["target_prefix"] = [""] * size
                requests.append(predict_request(signature, values))
    return requests
