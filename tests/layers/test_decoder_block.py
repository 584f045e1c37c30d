import numpy as np
import pytest

from keras_transformer.layers import DecoderBlock
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
    out = np.array(block(x, memory, inputs_mask=tpad, encoder_outputs_mask=spad))
    expected = blocks_reference.decoder_block(block, x, memory, tpad, spad)
    np.testing.assert_allclose(out[tpad], expected[tpad], atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_target_never_changes_earlier_outputs(rng, norm_first):
    block = _block(rng, norm_first)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    memory = rng.normal(size=(2, 4, D)).astype("float32")
    y = x.copy()
    y[:, 3:] = rng.normal(size=(2, 3, D))
    np.testing.assert_allclose(block(x, memory)[:, :3], block(y, memory)[:, :3], atol=1e-5)


def test_source_padding_is_honoured(rng):
    block = _block(rng)
    x = rng.normal(size=(1, 3, D)).astype("float32")
    memory = rng.normal(size=(1, 4, D)).astype("float32")
    noise = np.concatenate([memory, rng.normal(size=(1, 3, D))], 1).astype("float32")
    spad = np.array([[True] * 4 + [False] * 3])
    np.testing.assert_allclose(
        block(x, memory), block(x, noise, encoder_outputs_mask=spad), atol=1e-5
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_full_pass(rng, norm_first):
    block = _block(rng, norm_first)
    x = rng.normal(size=(2, 5, D)).astype("float32")
    memory = rng.normal(size=(2, 4, D)).astype("float32")
    spad = np.array([[True] * 4, [True, True, False, False]])
    full = block(x, memory, encoder_outputs_mask=spad)
    cache = block.init_cache(2, 5)
    cross = block.precompute_cross_cache(memory)
    for i in range(5):
        out, cache = block(
            x[:, i : i + 1],
            memory,
            encoder_outputs_mask=spad,
            self_attention_cache=cache,
            cross_attention_cache=cross,
            cache_index=i,
        )
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)


def test_decoder_only_block_skips_cross_attention(rng):
    block = DecoderBlock(D, HEADS, DFF, dropout=0.0)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    out = block(x)
    assert out.shape == (2, 4, D)


def test_cache_without_index_is_an_error(rng):
    block = _block(rng)
    with pytest.raises(ValueError, match="cache_index"):
        block(np.zeros((1, 1, D), "float32"), self_attention_cache=block.init_cache(1, 3))


def test_config_round_trip():
    block = DecoderBlock(D, HEADS, DFF, dropout=0.2, norm_first=True)
    assert DecoderBlock.from_config(block.get_config()).get_config() == block.get_config()
