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


def test_decoder_only_block_skips_cross_attention(rng):
    block = DecoderBlock(D, HEADS, DFF, dropout=0.0)
    x = rng.normal(size=(2, 4, D)).astype("float32")
    out = block(x)
    assert out.shape == (2, 4, D)


def test_cache_without_index_is_an_error(rng):
    block = _block(rng)
    with pytest.raises(ValueError, match="cache_index"):
        block(
            np.zeros((1, 1, D), "float32"),
            self_attention_cache=block.init_self_attention_cache(1, 3),
        )
