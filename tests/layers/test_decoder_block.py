import keras
import numpy as np
import pytest

from keras_transformer.layers import DecoderBlock
from tests.backends import assert_allclose, to_numpy
from tests.layers import blocks_reference
from tests.layers.test_encoder_block import _randomize

D, HEADS, DFF = 16, 4, 24


def _block(rng, norm_first=False, dropout=0.0):
    block = DecoderBlock(D, HEADS, DFF, dropout=dropout, norm_first=norm_first)
    block(np.zeros((1, 3, D), "float32"), np.zeros((1, 4, D), "float32"))
    _randomize(block, rng)
    return block


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_numpy_reference(rng, norm_first):
    block = _block(rng, norm_first, dropout=0.2)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    memory = rng.normal(size=(2, 7, D)).astype("float32")
    tpad = np.arange(5)[None] < np.array([[5], [3]])
    spad = np.arange(7)[None] < np.array([[4], [7]])
    out = to_numpy(block(x, memory, inputs_mask=tpad, encoder_outputs_mask=spad))
    expected = blocks_reference.decoder_block(block, x, memory, tpad, spad)
    assert_allclose(out[tpad], expected[tpad], atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_returns_the_cross_attention_weights_of_the_reference(rng, norm_first):
    block = _block(rng, norm_first)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    memory = rng.normal(size=(2, 7, D)).astype("float32")
    tpad = np.arange(5)[None] < np.array([[5], [3]])
    spad = np.arange(7)[None] < np.array([[4], [7]])
    out, scores = block(
        x, memory, inputs_mask=tpad, encoder_outputs_mask=spad, return_attention_scores=True
    )
    expected, expected_scores = blocks_reference.decoder_block(
        block, x, memory, tpad, spad, return_scores=True
    )
    assert tuple(scores.shape) == (2, HEADS, 5, 7)
    assert_allclose(to_numpy(out)[tpad], expected[tpad], atol=1e-4)
    rows = np.broadcast_to(tpad[:, None, :], (2, HEADS, 5))
    assert_allclose(to_numpy(scores)[rows], expected_scores[rows], atol=1e-5)
    # `cross_attention_scores` is the same call.
    assert_allclose(
        to_numpy(block.cross_attention_scores(x, memory, tpad, spad))[rows],
        expected_scores[rows],
        atol=1e-5,
    )


def test_scores_come_after_the_cache(rng):
    block = _block(rng)
    memory = rng.normal(size=(1, 6, D)).astype("float32")
    x = rng.normal(size=(1, 4, D)).astype("float32")
    _, full_scores = block(x, memory, return_attention_scores=True)
    cache = block.init_self_attention_cache(1, 4)
    cross = block.precompute_cross_attention_cache(memory)
    for i in range(4):
        out, cache, scores = block(
            x[:, i : i + 1],
            self_attention_cache=cache,
            cross_attention_cache=cross,
            cache_index=i,
            return_attention_scores=True,
        )
        assert_allclose(to_numpy(scores)[:, :, 0], to_numpy(full_scores)[:, :, i], atol=1e-5)


def test_scores_need_a_memory(rng):
    with pytest.raises(ValueError, match="needs `encoder_outputs`"):
        _block(rng)(np.zeros((1, 3, D), "float32"), return_attention_scores=True)


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_target_never_changes_earlier_outputs(rng, norm_first):
    block = _block(rng, norm_first)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    memory = rng.normal(size=(2, 4, D)).astype("float32")
    y = x.copy()
    y[:, 3:] = rng.normal(size=(2, 3, D))
    assert_allclose(block(x, memory)[:, :3], block(y, memory)[:, :3], atol=1e-5)


def test_source_padding_is_honoured(rng):
    block = _block(rng)
    x = rng.normal(size=(1, 3, D)).astype("float32")
    memory = rng.normal(size=(1, 4, D)).astype("float32")
    noise = np.concatenate([memory, rng.normal(size=(1, 3, D))], 1).astype("float32")
    spad = np.array([[True] * 4 + [False] * 3])
    assert_allclose(block(x, memory), block(x, noise, encoder_outputs_mask=spad), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_full_pass(rng, norm_first):
    block = _block(rng, norm_first)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    memory = rng.normal(size=(2, 4, D)).astype("float32")
    spad = np.array([[True] * 4, [True, True, False, False]])
    full = block(x, memory, encoder_outputs_mask=spad)
    cache = block.init_self_attention_cache(2, 5)
    cross = block.precompute_cross_attention_cache(memory)
    for i in range(5):
        out, cache = block(
            x[:, i : i + 1],
            memory,
            encoder_outputs_mask=spad,
            self_attention_cache=cache,
            cross_attention_cache=cross,
            cache_index=i,
        )
        assert_allclose(out[:, 0], full[:, i], atol=1e-5)


def _attention_parameters(width):
    return 4 * (width * width + width)  # query, key, value, output: kernel and bias


def _parameters(width, dff, cross):
    """A block's parameter count by the formula: attention, feed-forward,
    and a layer norm (gain and offset) after each sublayer."""
    attentions = 2 if cross else 1
    ffn = width * dff + dff + dff * width + width
    return attentions * _attention_parameters(width) + ffn + (attentions + 1) * 2 * width


@pytest.mark.parametrize("encoder", [False, True])
def test_a_block_built_without_an_encoder_has_no_cross_attention(rng, encoder):
    block = DecoderBlock(16, 2, 32, dropout=0.0)
    x = rng.normal(size=(2, 4, 16)).astype("float32")
    out = block(x, x) if encoder else block(x)
    assert out.shape == (2, 4, 16)
    # 16 wide: 3,344 parameters with cross-attention, 2,224 without.
    assert block.count_params() == _parameters(16, 32, cross=encoder)
    assert (block.cross_attention is None) == (not encoder)


def test_a_decoder_only_block_refuses_an_encoder_sequence_in_one_line(rng):
    block = DecoderBlock(D, HEADS, DFF)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    block(x)
    with pytest.raises(ValueError, match="built without cross-attention"):
        block(x, x)
    with pytest.raises(ValueError, match="built without cross-attention") as error:
        block.precompute_cross_attention_cache(x)
    assert "\n" not in str(error.value)


def test_a_decoder_only_block_decodes_with_its_cache(rng):
    block = DecoderBlock(D, HEADS, DFF, dropout=0.0)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    full = block(x)
    cache = block.init_self_attention_cache(2, 4)
    for i in range(4):
        out, cache = block(x[:, i : i + 1], self_attention_cache=cache, cache_index=i)
        assert_allclose(out[:, 0], full[:, i], atol=1e-5)


@pytest.mark.parametrize("with_cross_attention", [True, False])
def test_with_cross_attention_decides_whatever_the_first_call(rng, with_cross_attention):
    block = DecoderBlock(D, HEADS, DFF, with_cross_attention=with_cross_attention)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    block(x)
    assert (block.cross_attention is not None) == with_cross_attention
    again = DecoderBlock.from_config(block.get_config())
    assert again.with_cross_attention is with_cross_attention


def test_a_block_saved_before_the_option_builds_cross_attention(rng, tmp_path):
    """A config without `with_cross_attention` (every block saved before
    it) builds cross-attention, as blocks then did, so its weights load."""
    block = DecoderBlock(D, HEADS, DFF, with_cross_attention=True)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    expected = block(x)
    config = block.get_config()
    del config["with_cross_attention"]
    old = DecoderBlock.from_config(config)
    old(x)
    old.set_weights(block.get_weights())
    assert old.cross_attention is not None
    assert_allclose(old(x), expected, atol=1e-6)


def test_a_decoder_only_block_saves_and_loads(rng, tmp_path):
    inputs = keras.Input((None, D))
    model = keras.Model(inputs, DecoderBlock(D, HEADS, DFF, dropout=0.0)(inputs))
    x = rng.normal(size=(2, 4, D)).astype("float32")
    path = str(tmp_path / "lm.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.count_params() == model.count_params() == _parameters(D, DFF, cross=False)
    assert_allclose(loaded(x), model(x), atol=1e-6)


def test_a_cross_attention_mask_hides_what_padding_would(rng):
    block = _block(rng)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    memory = rng.normal(size=(2, 6, D)).astype("float32")
    padding = np.arange(6)[None, :] < np.array([[3], [5]])  # [2, 6]
    by_padding = block(x, memory, encoder_outputs_mask=padding)
    mask = np.broadcast_to(padding[:, None, :], (2, 4, 6))
    assert_allclose(block(x, memory, cross_attention_mask=mask), by_padding, atol=1e-6)
    # Merged with the padding mask, not instead of it.
    half = np.broadcast_to(np.arange(6)[None, None, :] < 4, (2, 4, 6))
    both = np.logical_and(mask, half)
    assert_allclose(
        block(x, memory, encoder_outputs_mask=padding, cross_attention_mask=half),
        block(x, memory, cross_attention_mask=both),
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"cross_attention_mask": np.ones((2, 6), bool)}, "`attention_mask` must be"),
        ({"attention_mask": np.ones((4, 4), bool)}, "`attention_mask` must be"),
        ({"encoder_outputs_mask": np.ones((2, 1, 6), bool)}, "`value_mask` must be"),
    ],
)
def test_a_mask_of_the_wrong_rank_is_named(rng, arguments, message):
    block = _block(rng)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    memory = rng.normal(size=(2, 6, D)).astype("float32")
    with pytest.raises(ValueError, match=message):
        block(x, memory, **arguments)


def test_cache_without_index_is_an_error(rng):
    block = _block(rng)
    with pytest.raises(ValueError, match="cache_index"):
        block(
            np.zeros((1, 1, D), "float32"),
            self_attention_cache=block.init_self_attention_cache(1, 3),
        )
