"""The CTranslate2 export is the model: its log-probabilities and greedy
tokens are ours, for every architecture it maps."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data.tokenizer import END_ID, START_ID
from keras_transformer.decoding import Translator
from keras_transformer.export.ctranslate2 import export_ctranslate2
from keras_transformer.models import Transformer

pytest.importorskip("ctranslate2")

SENTENCES = [
    "The dog sleeps.",
    "A young woman reads the book because the children laugh.",
    "The old teachers see a red ball in the garden.",
]
MAX_OUTPUT = 16

ARCHITECTURES = {
    "post-norm, separate embeddings": {},
    "pre-norm, separate embeddings": dict(norm_first=True),
    "post-norm, shared embeddings": dict(share_embeddings=True),
    "pre-norm, shared embeddings": dict(norm_first=True, share_embeddings=True),
    "post-norm, two encoder blocks, one narrower decoder block, tanh GELU": dict(
        num_decoder_layers=1,
        decoder_num_heads=2,
        decoder_dff=48,
        activation="keras_transformer>gelu_tanh",
    ),  # fmt: skip
    "post-norm, shared embeddings, sigmoid GELU, untied output": dict(
        share_embeddings=True,
        tie_output_embeddings=False,
        activation="keras_transformer>gelu_sigmoid",
    ),
}

# CTranslate2 runs in a process of its own, as it is used: without TensorFlow.
_CT2 = textwrap.dedent("""
    import json, sys
    import ctranslate2
    model_dir, request = sys.argv[1], json.loads(sys.stdin.read())
    translator = ctranslate2.Translator(model_dir, intra_threads=1)
    sources, targets = request["sources"], request["targets"]
    scored = translator.score_batch(sources, targets)
    greedy = translator.translate_batch(
        sources, beam_size=1, max_decoding_length=request["max_length"], return_scores=True)
    print(json.dumps({"log_probs": [r.log_probs for r in scored],
                      "greedy": [r.hypotheses[0] for r in greedy]}))
""")


def run_ct2(model_dir, sources, targets, max_length):
    """`_CT2` on the CTranslate2 model at `model_dir`, in a process without
    TensorFlow: `{"log_probs": [...], "greedy": [[piece, ...], ...]}`."""
    import json

    request = {"sources": sources, "targets": targets, "max_length": max_length}
    result = subprocess.run(
        [sys.executable, "-c", _CT2, model_dir], input=json.dumps(request),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tokenizers(trained_model):
    _, source, target = trained_model
    return source, target


def _model(overrides, source, target):
    import keras

    keras.utils.set_random_seed(len(overrides))
    target_size = source.vocab_size if overrides.get("share_embeddings") else target.vocab_size
    model = Transformer(2, 32, 4, 64, source.vocab_size, target_size, dropout=0.0,
                        **overrides)  # fmt: skip
    model.build(((None, None), (None, None)))
    # Random weights give near-uniform distributions; sharpen the output so
    # that greedy search has clear winners, as a trained model has.
    if model.output_projection is not None:
        kernel, bias = model.output_projection.get_weights()
        model.output_projection.set_weights([kernel * 8, bias])
    else:
        table = model.source_embedding.token_embedding
        table.set_weights([table.get_weights()[0] * 3])
    return model


@pytest.mark.parametrize("overrides", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_log_probabilities_and_greedy_tokens_are_the_models(overrides, tokenizers, tmp_path):
    source, target = tokenizers
    if overrides.get("share_embeddings"):
        target = source  # one vocabulary for both sides
    model = _model(overrides, source, target)
    model_dir = export_ctranslate2(model, source, target, str(tmp_path / "ct2"))
    assert {"model.bin", "config.json", "source.model", "target.model"} <= set(
        os.listdir(model_dir)
    )

    translator = Translator(model, source, target, max_output_length=MAX_OUTPUT)
    text = tf.constant(SENTENCES)
    context = translator.encode_text(text)
    greedy = translator.translate_nbest(text, beam_size=1)["ids"][:, 0].numpy()
    source_pieces, target_pieces = source.pieces(), target.pieces()
    # CTranslate2 adds the end token to sources and targets itself.
    sources = [[source_pieces[i] for i in row if i not in (0, END_ID)] for row in context.numpy()]
    targets = [[target_pieces[i] for i in row if i not in (0, END_ID)] for row in greedy]
    assert max(len(t) for t in targets) >= 3  # searches that have something to agree on
    theirs = run_ct2(model_dir, sources, targets, MAX_OUTPUT)

    # Ours, teacher-forced: every token's log-probability, end token included.
    for row, (pieces, log_probs) in enumerate(zip(targets, theirs["log_probs"])):
        ids = [START_ID] + [target_pieces.index(p) for p in pieces]
        logits = model((context[row : row + 1], tf.constant([ids])), training=False)[0]
        want = tf.nn.log_softmax(logits, axis=-1).numpy()
        want = [want[i, token] for i, token in enumerate(ids[1:] + [END_ID])]
        np.testing.assert_allclose(log_probs, want, atol=1e-4)
    # Greedy search: the same tokens (CTranslate2 leaves out the end token).
    assert theirs["greedy"] == targets


def test_an_existing_directory_is_never_overwritten(tokenizers, tmp_path):
    source, target = tokenizers
    model = _model({}, source, target)
    (tmp_path / "ct2").mkdir()
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_ctranslate2(model, source, target, str(tmp_path / "ct2"))
    with pytest.raises(ValueError, match="quantization"):
        export_ctranslate2(model, source, target, str(tmp_path / "q"), quantization="int3")


def test_a_run_exports_as_numbered_versions_with_int8_weights(trained_run, tmp_path):
    from keras_transformer.export import export_run

    base = str(tmp_path / "ct2")
    first = export_run(trained_run["run"], base, format="ctranslate2", quantization="int8")
    second = export_run(trained_run["run"], base, format="ctranslate2")
    assert first.endswith(os.sep + "1") and second.endswith(os.sep + "2")
    # int8 weights take about a quarter of float32's bytes.
    size = [os.path.getsize(os.path.join(d, "model.bin")) for d in (first, second)]
    assert size[0] < 0.5 * size[1]
