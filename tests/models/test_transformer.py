import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.models import PRESETS, Transformer
from keras_transformer.models.transformer import TABLE_MAJOR_MAX_ROWS
from tests.backends import assert_allclose, to_numpy
from tests.processes import REPO

SRC_VOCAB, TGT_VOCAB = 40, 50


def _model(**overrides):
    config = dict(num_layers=2, d_model=32, num_heads=4, dff=64, dropout=0.1)
    config.update(overrides)
    return Transformer(source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB, **config)


def _batch(rng, batch=3, src_len=7, tgt_len=6):
    src = rng.integers(1, SRC_VOCAB, (batch, src_len))
    tgt = rng.integers(1, TGT_VOCAB, (batch, tgt_len))
    src[1, 4:] = 0
    tgt[2, 3:] = 0
    return src, tgt


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("share_embeddings", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_padding_never_changes_logits(rng, norm_first, share_embeddings, policy):
    keras.config.set_dtype_policy(policy)
    vocab = dict(source_vocab_size=TGT_VOCAB) if share_embeddings else {}
    model = Transformer(
        2,
        32,
        4,
        64,
        target_vocab_size=TGT_VOCAB,
        norm_first=norm_first,
        share_embeddings=share_embeddings,
        **{"source_vocab_size": SRC_VOCAB, **vocab},
    )
    src, tgt = _batch(rng)
    logits = to_numpy(model((src, tgt)))
    assert logits.dtype == np.float32
    padded_src = np.pad(src, ((0, 0), (0, 5)))
    padded_tgt = np.pad(tgt, ((0, 0), (0, 4)))
    padded = to_numpy(model((padded_src, padded_tgt)))
    atol = 5e-2 if policy == "mixed_float16" else 1e-4
    real = tgt != 0
    assert_allclose(padded[:, :6][real], logits[real], atol=atol)


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_a_target_token_never_changes_earlier_logits(rng, norm_first):
    model = _model(norm_first=norm_first)
    src, tgt = _batch(rng)
    tgt[2] = rng.integers(1, TGT_VOCAB, 6)
    changed = tgt.copy()
    changed[:, 4] = (changed[:, 4] % (TGT_VOCAB - 1)) + 1
    a, b = to_numpy(model((src, tgt))), to_numpy(model((src, changed)))
    # Logits at position i see target tokens 0..i.
    assert_allclose(a[:, :4], b[:, :4], atol=1e-5)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-4


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_pass(rng, norm_first):
    model = _model(norm_first=norm_first)
    src, tgt = _batch(rng)
    tgt[2] = rng.integers(1, TGT_VOCAB, 6)
    full = to_numpy(model((src, tgt)))
    state = model.init_decoding_state(src, max_length=8)
    for i in range(6):
        logits, state = model.decode_step(tgt[:, i], i, state)
        assert_allclose(logits, full[:, i], atol=1e-4)


def test_decoding_state_takes_the_source_encoded_apart(rng):
    # Rows encoded one at a time, each cut to its own length and padded
    # back (as the translator encodes groups of similar length), give the
    # state of the whole padded batch encoded at once.
    model = _model()
    src, tgt = _batch(rng)
    lengths = (src != 0).sum(axis=1)
    rows = [
        np.pad(
            to_numpy(model.encode(src[r : r + 1, : lengths[r]])),
            [(0, 0), (0, src.shape[1] - lengths[r]), (0, 0)],
        )
        for r in range(len(src))
    ]
    apart = model.init_decoding_state(src, 8, encoded=np.concatenate(rows))
    whole = model.init_decoding_state(src, 8)
    for i in range(tgt.shape[1]):
        expected, whole = model.decode_step(tgt[:, i], i, whole)
        logits, apart = model.decode_step(tgt[:, i], i, apart)
        assert_allclose(logits, expected, atol=1e-5)
    # The state is built from what it is given, not from the source again.
    other = model.init_decoding_state(src, 8, encoded=np.zeros_like(np.concatenate(rows)))
    moved, _ = model.decode_step(tgt[:, 0], 0, other)
    first, _ = model.decode_step(tgt[:, 0], 0, model.init_decoding_state(src, 8))
    assert np.abs(to_numpy(moved) - to_numpy(first)).max() > 1e-3


ARCHITECTURES = {
    "post-norm": {},
    "pre-norm, shared embeddings": dict(norm_first=True, share_embeddings=True),
    "learned positions, gelu, one narrower decoder block": dict(
        position_encoding="learned",
        activation="gelu",
        num_decoder_layers=1,
        decoder_num_heads=2,
        decoder_dff=48,
    ),  # fmt: skip
    "Marian's positions, scale, tied output and bias": dict(
        share_embeddings=True, position_layout="halves", output_bias=True, activation="silu"
    ),
}


def _compiled(fn):
    """`fn` as the fast paths run it: XLA under TensorFlow, `jit` under JAX."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return fn


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("overrides", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_compiled_steps_over_shared_source_caches_equal_the_full_pass(rng, overrides, beams):
    # The step of every decoding path: compiled, caches written in place and
    # self-attention projections fused, the rows (beams) of a source sharing
    # its untiled encoder keys, values and mask, as the compiled export runs.
    vocab = SRC_VOCAB if overrides.get("share_embeddings") else TGT_VOCAB
    model = Transformer(2, 32, 4, 64, SRC_VOCAB, vocab, dropout=0.0, **overrides)
    src, _ = _batch(rng)
    tgt = rng.integers(1, vocab, (len(src) * beams, 6))
    full = to_numpy(model((np.repeat(src, beams, axis=0), tgt)))

    def decode(src, tgt):
        state = model.init_decoding_state(src, 8)
        constant = {key: state.pop(key) for key in ("cross_attention_cache", "encoder_mask")}
        caches = keras.tree.map_structure(
            lambda t: keras.ops.repeat(t, beams, axis=0), state["self_attention_cache"]
        )
        outputs = []
        for i in range(tgt.shape[1]):
            logits, state = model.decode_step(
                tgt[:, i], i, {**constant, "self_attention_cache": caches}, compiled=True
            )
            caches = state["self_attention_cache"]
            outputs.append(logits)
        return keras.ops.stack(outputs, axis=1)

    got = _compiled(decode)(keras.ops.convert_to_tensor(src), keras.ops.convert_to_tensor(tgt))
    assert_allclose(got, full, atol=1e-4)


@pytest.mark.parametrize("compiled", ["no", "static rows", "rows unknown when traced"])
@pytest.mark.parametrize("output_bias", [False, True])
@pytest.mark.parametrize("rows", [1, TABLE_MAJOR_MAX_ROWS, TABLE_MAJOR_MAX_ROWS + 1])
def test_a_steps_tied_projection_equals_the_reference_on_both_sides_of_its_row_bound(
    rng, rows, output_bias, compiled
):
    # A compiled step of up to TABLE_MAJOR_MAX_ROWS rows, and every step
    # not compiled, read the table as stored, (E · rowsᵀ)ᵀ; a compiled
    # step of more rows takes rows · Eᵀ, chosen when XLA compiles where the
    # trace has no row count (the compiled export): the same logits.
    if compiled == "rows unknown when traced" and keras.backend.backend() != "tensorflow":
        pytest.skip("only TensorFlow traces a function without its shapes")
    model = _model(tie_output_embeddings=True, output_bias=output_bias, dropout=0.0)
    src = rng.integers(1, SRC_VOCAB, (rows, 5)).astype("int32")
    tgt = rng.integers(1, TGT_VOCAB, (rows, 2)).astype("int32")
    model((src, tgt))
    if output_bias:
        model.logits_bias.assign(rng.normal(size=TGT_VOCAB).astype("float32"))
    expected, _ = _tied_reference_and_logits(model, src, tgt)

    def steps(src, tgt):
        state = model.init_decoding_state(src, 4)
        outputs = []
        for i in range(tgt.shape[1]):
            logits, state = model.decode_step(tgt[:, i], i, state, compiled=compiled != "no")
            outputs.append(logits)
        return keras.ops.stack(outputs, axis=1)

    if compiled == "rows unknown when traced":
        import tensorflow as tf

        spec = [tf.TensorSpec([None, 5], tf.int32), tf.TensorSpec([None, 2], tf.int32)]
        run = tf.function(steps, jit_compile=True, input_signature=spec)
    else:
        run = _compiled(steps) if compiled == "static rows" else steps
    got = run(keras.ops.convert_to_tensor(src), keras.ops.convert_to_tensor(tgt))
    assert_allclose(got, expected, atol=1e-4)


def test_encode_and_decode_compose_to_call(rng):
    model = _model()
    src, tgt = _batch(rng)
    encoded = model.encode(src)
    logits = model.decode(tgt, encoded, encoder_padding_mask=src != 0)
    assert_allclose(logits, model((src, tgt)), atol=1e-6)


def _hidden_and_logits(model, src, tgt):
    """The decoder's last hidden states, through the model's own layers."""
    encoded = model.encode(src, training=False)
    x = model.target_embedding(tgt)
    hidden = model.decoder(
        x, encoded, inputs_mask=tgt != 0, encoder_outputs_mask=src != 0, training=False
    )
    return to_numpy(hidden), to_numpy(model((src, tgt), training=False))


def _tied_reference_and_logits(model, src, tgt):
    """NumPy's tied projection of the decoder's hidden states (`hidden ·
    Eᵀ`, plus the output bias where the model has one), and the model's
    own logits."""
    hidden, logits = _hidden_and_logits(model, src, tgt)
    expected = hidden @ np.array(model.target_embedding.embeddings).T
    if model.logits_bias is not None:
        expected = expected + np.array(model.logits_bias)
    return expected, logits


@pytest.mark.parametrize("output_bias", [False, True])
def test_tied_output_with_separate_vocabularies(rng, output_bias):
    model = _model(tie_output_embeddings=True, output_bias=output_bias)
    src, tgt = _batch(rng)
    model((src, tgt))
    assert model.output_projection is None
    assert model.source_embedding is not model.target_embedding
    names = [w.path for w in model.weights]
    assert any("output_bias" in n for n in names) == output_bias
    if output_bias:
        model.logits_bias.assign(rng.normal(size=TGT_VOCAB).astype("float32"))
    expected, logits = _tied_reference_and_logits(model, src, tgt)
    assert_allclose(logits, expected, atol=1e-4)


def test_output_bias_with_shared_embeddings_shifts_every_logit(rng):
    model = Transformer(2, 32, 4, 64, SRC_VOCAB, SRC_VOCAB, share_embeddings=True, output_bias=True)
    src, tgt = _batch(rng)
    tgt = tgt % SRC_VOCAB
    before = to_numpy(model((src, tgt), training=False))
    bias = rng.normal(size=SRC_VOCAB).astype("float32")
    model.logits_bias.assign(bias)
    assert_allclose(to_numpy(model((src, tgt), training=False)) - before,
                               np.broadcast_to(bias, before.shape), atol=1e-4)  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [
        dict(position_layout="halves", scale_embeddings=False, activation="silu"),
        dict(tie_output_embeddings=True, output_bias=True, layer_norm_epsilon=1e-5),
        dict(num_decoder_layers=3),
        dict(decoder_num_heads=8, decoder_dff=40),
    ],
)
def test_marian_options_round_trip_their_config(rng, options):
    model = _model(**options)
    src, tgt = _batch(rng)
    logits = to_numpy(model((src, tgt), training=False))
    config = model.get_config()
    for key, value in options.items():
        assert config[key] == value
    restored = Transformer.from_config(config)
    restored((src, tgt))
    restored.set_weights(model.get_weights())
    assert_allclose(restored((src, tgt), training=False), logits, atol=1e-6)
    assert restored.target_embedding.position_layout == model.target_embedding.position_layout


@pytest.mark.parametrize("depth", [None, 1, 3])
def test_the_decoder_may_be_deeper_or_shallower_than_the_encoder(rng, depth):
    model = _model(num_decoder_layers=depth)
    src, tgt = _batch(rng)
    model((src, tgt))
    assert len(model.encoder.blocks) == 2
    assert len(model.decoder.blocks) == (depth or 2)
    assert model.get_config()["num_decoder_layers"] == (depth or 2)
    # A config written before the argument existed reads as equal depths.
    config = {k: v for k, v in model.get_config().items() if k != "num_decoder_layers"}
    assert Transformer.from_config(config).num_decoder_layers == 2


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_a_decoder_depth_that_is_not_a_positive_int_is_refused(depth):
    with pytest.raises(ValueError, match="num_decoder_layers"):
        _model(num_decoder_layers=depth)


def test_the_decoder_blocks_may_have_heads_and_widths_of_their_own(rng):
    # Marian's decoder_attention_heads and decoder_ffn_dim.
    model = _model(decoder_num_heads=2, decoder_dff=24)
    src, tgt = _batch(rng)
    model((src, tgt))
    assert {b.self_attention.num_heads for b in model.encoder.blocks} == {4}
    for block in model.decoder.blocks:
        assert block.self_attention.num_heads == block.cross_attention.num_heads == 2
        assert tuple(block.feed_forward.weights[0].shape) == (32, 24)  # the first kernel
    assert {tuple(b.feed_forward.weights[0].shape) for b in model.encoder.blocks} == {(32, 64)}
    state = model.init_decoding_state(src, 5)
    assert tuple(state["self_attention_cache"][0][0].shape) == (3, 2, 5, 16)
    # A config written before the arguments existed reads as one width.
    config = model.get_config()
    assert (config["decoder_num_heads"], config["decoder_dff"]) == (2, 24)
    old = {k: v for k, v in config.items() if k not in ("decoder_num_heads", "decoder_dff")}
    restored = Transformer.from_config(old)
    assert (restored.decoder_num_heads, restored.decoder_dff) == (4, 64)


@pytest.mark.parametrize(
    "options,match",
    [
        (dict(decoder_num_heads=0), "decoder_num_heads"),
        (dict(decoder_num_heads=3), "divisible by `decoder_num_heads`"),
        (dict(decoder_dff=-2), "decoder_dff"),
        (dict(decoder_dff=1.5), "decoder_dff"),
    ],
)
def test_decoder_widths_that_cannot_be_are_refused(options, match):
    with pytest.raises(ValueError, match=match):
        _model(**options)


def test_shared_embeddings_with_an_output_projection_of_its_own(rng):
    # Marian's share_encoder_decoder_embeddings with tie_word_embeddings=false.
    model = Transformer(
        2, 32, 4, 64, SRC_VOCAB, SRC_VOCAB, share_embeddings=True, tie_output_embeddings=False
    )
    src, tgt = _batch(rng)
    tgt = tgt % SRC_VOCAB
    hidden, logits = _hidden_and_logits(model, src, tgt)
    assert model.source_embedding is model.target_embedding
    assert model.logits_bias is None
    kernel = np.array(model.output_projection.kernel)
    assert kernel.shape == (32, SRC_VOCAB)
    expected = hidden @ kernel + np.array(model.output_projection.bias)
    assert_allclose(logits, expected, atol=1e-4)
    # Not the tied projection: the embedding's transpose gives other logits.
    assert np.abs(hidden @ np.array(model.target_embedding.embeddings).T - logits).max() > 1e-2
    config = model.get_config()
    assert (config["share_embeddings"], config["tie_output_embeddings"]) == (True, False)
    restored = Transformer.from_config(config)
    restored((src, tgt))
    restored.set_weights(model.get_weights())
    assert_allclose(restored((src, tgt), training=False), logits, atol=1e-6)


def test_save_and_load_in_a_fresh_process(tmp_path, rng):
    model = _model(norm_first=True)
    src, tgt = _batch(rng)
    expected = to_numpy(model((src, tgt)))
    np.savez(tmp_path / "batch.npz", src=src, tgt=tgt, logits=expected)
    model.save(tmp_path / "m.keras")
    script = textwrap.dedent(
        f"""
        import numpy as np, keras
        import keras_transformer  # registers the classes: no custom_objects
        from tests.backends import full_float32_products
        full_float32_products()  # as this process computes (on a GPU, not TF32)
        data = np.load({str(tmp_path / "batch.npz")!r})
        model = keras.saving.load_model({str(tmp_path / "m.keras")!r})
        logits = keras.ops.convert_to_numpy(model((data["src"], data["tgt"])))
        np.testing.assert_array_equal(logits, data["logits"])
        print("IDENTICAL")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        # XLA's flags too: its code generation decides the last bits.
        env={
            "KERAS_BACKEND": keras.backend.backend(),
            "PATH": "/usr/bin:/bin",
            # The parent's packages, where they come from PYTHONPATH.
            **{k: v for k, v in os.environ.items() if k in ("XLA_FLAGS", "PYTHONPATH")},
        },
        cwd=REPO,  # where the child imports `tests` from
    )
    assert "IDENTICAL" in result.stdout, result.stderr[-3000:]


@pytest.mark.parametrize("name", ["tiny", "small", "base", "big"])
def test_presets(name):
    model = Transformer.from_preset(name, 100, 120)
    assert model.d_model == PRESETS[name]["d_model"]
    assert model.get_config()["target_vocab_size"] == 120


def test_transformer_tiny_is_the_published_recipe():
    model = Transformer.from_preset("transformer_tiny", 500, 500)
    config = model.get_config()
    assert (config["num_layers"], config["d_model"], config["num_heads"], config["dff"]) == (
        4,
        128,
        4,
        256,
    )
    assert config["dropout"] == 0.3 and config["share_embeddings"]
    assert config["attention_dropout"] == 0.0  # fairseq's default
    model.build(((None, None), (None, None)))
    # One matrix for the source and target embeddings and the output layer.
    assert model.output_projection is None
    embeddings = [w for w in model.weights if "embedding" in w.path and w.shape[0] == 500]
    assert len(embeddings) == 1
    with pytest.raises(ValueError, match="one vocabulary"):
        Transformer.from_preset("transformer_tiny", 500, 600)


def test_paper_presets():
    assert PRESETS["small"] == dict(num_layers=3, d_model=256, num_heads=4, dff=1024, dropout=0.1)
    assert PRESETS["base"] == dict(num_layers=6, d_model=512, num_heads=8, dff=2048, dropout=0.1)
    assert PRESETS["big"] == dict(num_layers=6, d_model=1024, num_heads=16, dff=4096, dropout=0.3)


def test_preset_errors():
    with pytest.raises(ValueError, match="huge"):
        Transformer.from_preset("huge", 10, 10)
    with pytest.raises(ValueError, match="source_vocab_size=10"):
        Transformer(1, 8, 2, 8, 10, 12, share_embeddings=True)
    with pytest.raises(ValueError, match="divisible"):
        Transformer(1, 10, 3, 8, 10, 12)


@pytest.mark.trains
def test_learns_to_copy_sequences():
    # Seeded: which tests ran before would otherwise pick the initialization.
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    # One layer each side learns it (cross-attention carries every token)
    # in 192 steps, where two layers took 320.
    n, length, vocab = 2048, 6, 16
    x = rng.integers(3, vocab, (n, length))
    target = x
    target_in = np.concatenate([np.ones((n, 1), int), target], 1)
    target_out = np.concatenate([target, 2 * np.ones((n, 1), int)], 1)
    model = Transformer(1, 64, 4, 128, vocab, vocab, dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(
            kt.schedules.WarmupSchedule(64, warmup_steps=50), beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        loss=kt.losses.MaskedSparseCategoricalCrossentropy(),
        metrics=[kt.metrics.MaskedAccuracy()],
    )
    history = model.fit((x, target_in), target_out, batch_size=64, epochs=6, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] / 4
    assert history.history["masked_accuracy"][-1] > 0.97


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"bogus": 1, "d_model": 64}, r"argument\(s\) \['bogus'\]; its arguments: activation, "),
        ({"dropout": 1.5}, r"`dropout` must be in \[0, 1\). Received: dropout=1.5"),
        ({"dropout_rate": 0.1}, r"argument\(s\) \['dropout_rate'\]"),
        ({"attention_dropout": -0.1}, r"`attention_dropout` must be in \[0, 1\)"),
        ({"dropout": True}, r"`dropout` must be in \[0, 1\)"),
    ],
)  # fmt: skip
def test_overrides_that_are_no_argument_or_no_rate_are_named(overrides, match):
    with pytest.raises(ValueError, match=match):
        Transformer.from_preset("tiny", 50, 60, **overrides)
