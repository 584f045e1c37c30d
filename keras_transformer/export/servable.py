"""The servable SavedModel: raw strings in, beam-searched translations out."""

import os

import keras
import tensorflow as tf

from keras_transformer._version_folders import write_version
from keras_transformer.decoding.translator import Translator
from keras_transformer.export.compiled import (
    compiled_info,
    compiled_shape_requests,
    write_export_info,
)
from keras_transformer.export.generation_record import write_generation
from keras_transformer.export.servability import check_servable
from keras_transformer.export.warmup import warmup_requests, write_warmup_file
from keras_transformer.runtime.signatures import SIGNATURE_INPUTS, SIGNATURES


def export_translator(
    model,
    source_tokenizer,
    target_tokenizer,
    export_dir,
    generation=None,
    *,
    check=True,
    warmup=True,
    jit_compile=False,
    batch_sizes=None,
    lengths=None,
    split_batches=True,
    **settings,
):
    """Writes a SavedModel that TF Serving runs, with the tokenizers inside.

    Signatures (method `tensorflow/serving/predict`, input `text`: string
    `[batch]`, and for `score` also `translation`):

    - `serving_default`: `translation` string `[batch]`, `score` float32
      `[batch]` (length-normalized log-probability of the best beam).
    - `translate_nbest`: `translations` string `[batch, beam]`, `scores`
      float32 `[batch, beam]`, best first.
    - `translate_greedy`: `translation`, `score` from greedy search.
    - `attention`: `source_tokens` `[batch, s]`, `target_tokens` `[batch,
      t]` (subword pieces of the best beam) and `weights` `[batch, t, s]`,
      the cross-attention behind `translate --plot-attention`.
    - `translate_sample`: `translation`, `score` drawn token by token from
      the model with the sampling options fixed here (`sampling_topk=1`
      is greedy); the score is the sample's length-normalized
      log-probability under the model. A new draw on every request.
    - `score`: inputs `text` and `translation`; outputs `log_prob` float32
      `[batch]` (the sum of the translation's token log-probabilities, end
      token included) and `length` int32 `[batch]` (tokens summed), for
      reranking and corpus filtering. Text and translation are cut only
      at the model's position table, never at `max_input_length` or
      `max_output_length` (see `Translator.score`).
    - `translate_prefix`, `translate_prefix_nbest`: inputs `text` and
      `target_prefix`; the outputs of `serving_default` and
      `translate_nbest`, each translation continuing its prefix and
      holding it, as CTranslate2's `target_prefix` (interactive
      translation). An empty prefix is a plain translation; a prefix
      longer than `max_output_length` tokens, or not UTF-8, is refused.

    Inputs longer than `max_input_length` tokens are truncated; an empty
    string translates to an empty string; invalid UTF-8 bytes are replaced
    by U+FFFD before tokenization. Built with `keras.export.ExportArchive`.

    By default no function is compiled with XLA, and any TF Serving runs
    the export. With `jit_compile=True` the id-level work of every
    signature (the encoder, the search loops over the model's
    `decode_step`, the scoring pass) is compiled with XLA, and tokenization stays outside; requests
    run padded to `batch_sizes` x `lengths` and cut back (see
    `Translator`), so the export holds one compiled program per shape and
    search, all of which its warmup records run. TF Serving then needs
    `--xla_cpu_compilation_enabled=true` (without it, it answers "XLA
    compilation disabled"); `assets.extra/keras_transformer.json` records
    this and the shapes.

    Args:
        model: a trained `Transformer`.
        source_tokenizer, target_tokenizer: the run's `SubwordTokenizer`s.
        export_dir: where to write (must not exist).
        generation: the `GenerationConfig` of every signature (the beams
            of `serving_default` and `translate_nbest`, the length
            penalty, the caps, the sampling of `translate_sample`, the
            suppressed sequences), recorded in
            `assets.extra/generation.json`. Default: `GenerationConfig()`.
        check: run `check_servable` on the result.
        warmup: write TF Serving's warmup records
            (`assets.extra/tf_serving_warmup_requests`: batches of 1 and 8
            for every signature; with `jit_compile`, a request of every
            compiled shape too), which TF Serving and `keras-transformer
            serve` replay before the version serves its first request.
        jit_compile: compile the id-level work with XLA (see above).
        batch_sizes: with `jit_compile`, the batch sizes requests are cut
            and padded to (default `(1, 8, 32)`), as TF Serving's
            `allowed_batch_sizes`.
        lengths: with `jit_compile`, the compiled token lengths (default
            16, 24, 32, 48, 64, ... up to the longest input or translation).
        split_batches: with `jit_compile`, a batch of two rows or more
            runs as two programs at once, compiled for half its size (see
            `ShapeRunner`); off, as one program.
        **settings: fields of `GenerationConfig` over `generation`'s.

    Returns:
        `export_dir`.
    """
    if os.path.exists(export_dir):
        raise FileExistsError(f"{export_dir} exists; a version is never overwritten")
    translator = Translator(
        model,
        source_tokenizer,
        target_tokenizer,
        generation,
        jit_compile=jit_compile,
        batch_sizes=batch_sizes,
        lengths=lengths,
        split_batches=split_batches,
        **settings,
    )

    def clean(text):
        # Serving must not fail on bad bytes: replace them, as documented.
        return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")

    def serving_default(text):
        result = translator.translate(clean(text))
        return {"translation": result["translation"], "score": result["score"]}

    def translate_nbest(text):
        result = translator.translate_nbest(clean(text))
        return {"translations": result["translations"], "scores": result["scores"]}

    def translate_greedy(text):
        result = translator.translate_greedy(clean(text))
        return {"translation": result["translation"], "score": result["score"]}

    def attention(text):
        return translator.attention(clean(text))

    def translate_sample(text):
        return translator.translate_sample(clean(text))

    def score(text, translation):
        return translator.score(clean(text), clean(translation))

    # The prefix is refused, not repaired, where it is not UTF-8: a
    # replaced byte would be forced into the translation.
    def translate_prefix(text, target_prefix):
        result = translator.translate(clean(text), target_prefix=target_prefix)
        return {"translation": result["translation"], "score": result["score"]}

    def translate_prefix_nbest(text, target_prefix):
        result = translator.translate_nbest(clean(text), target_prefix=target_prefix)
        return {"translations": result["translations"], "scores": result["scores"]}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(source_tokenizer)
    archive.track(target_tokenizer)
    functions = (
        serving_default,
        translate_nbest,
        translate_greedy,
        attention,
        translate_sample,
        score,
        translate_prefix,
        translate_prefix_nbest,
    )
    for name, fn in zip(SIGNATURES, functions):
        spec = [tf.TensorSpec([None], tf.string, name=n) for n in SIGNATURE_INPUTS[name]]
        archive.add_endpoint(name, fn, input_signature=spec)
    archive.write_out(export_dir, verbose=False)
    write_generation(export_dir, translator.generation)
    if jit_compile:
        write_export_info(export_dir, compiled_info(translator))
    if warmup:
        requests = warmup_requests(SIGNATURE_INPUTS)
        if jit_compile:
            requests += compiled_shape_requests(translator, SIGNATURE_INPUTS)
        write_warmup_file(export_dir, requests)
    if check:
        check_servable(export_dir)
    return export_dir


def export_version(model, source_tokenizer, target_tokenizer, export_base, version=None, **kwargs):
    """Exports to `export_base/<version>/`, by default the next free version.

    The SavedModel is written beside the base and renamed into place, so a
    server watching `export_base` never sees a half-written version.
    """
    return write_version(
        export_base,
        version,
        lambda staging: export_translator(
            model, source_tokenizer, target_tokenizer, staging, **kwargs
        ),
    )
