import numpy as np
import pytest

from keras_transformer.layers import Decoder
from tests.backends import assert_allclose


@pytest.mark.parametrize("beams", [1, 2])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cache_equals_full_pass(rng, norm_first, beams):
    # With beams, the rows of a source share its untiled cross-attention
    # cache and mask, and each row decodes as the full pass of its own.
    decoder = Decoder(2, 16, 4, 32, dropout=0.0, norm_first=norm_first)
    x = rng.normal(size=(3 * beams, 6, 16)).astype("float32")
    memory = rng.normal(size=(3, 5, 16)).astype("float32")
    spad = np.arange(5)[None] < np.array([[5], [3], [1]])
    full = decoder(
        x, np.repeat(memory, beams, axis=0), encoder_outputs_mask=np.repeat(spad, beams, axis=0)
    )
    cache = decoder.init_self_attention_cache(3 * beams, 8)
    assert [[tuple(t.shape) for t in block] for block in cache] == [[(3 * beams, 4, 8, 4)] * 2] * 2
    cross = decoder.precompute_cross_attention_cache(memory)
    assert [[tuple(t.shape) for t in block] for block in cross] == [[(3, 4, 5, 4)] * 2] * 2
    for i in range(6):
        out, cache = decoder(
            x[:, i : i + 1],
            None,
            encoder_outputs_mask=spad,
            self_attention_cache=cache,
            cross_attention_cache=cross,
            cache_index=i,
        )
        assert_allclose(out[:, 0], full[:, i], atol=1e-5)
        assert type(cache) is tuple and len(cache) == 2


@pytest.mark.parametrize("with_cache", [False, True])
def test_returns_the_last_blocks_cross_attention(rng, with_cache):
    from tests.backends import to_numpy

    decoder = Decoder(2, 16, 4, 32, dropout=0.0)
    x = rng.normal(size=(2, 3, 16)).astype("float32")
    memory = rng.normal(size=(2, 5, 16)).astype("float32")
    spad = np.arange(5)[None] < np.array([[5], [2]])
    out, scores = decoder(x, memory, encoder_outputs_mask=spad, return_attention_scores=True)
    assert_allclose(
        to_numpy(out), to_numpy(decoder(x, memory, encoder_outputs_mask=spad)), atol=1e-6
    )
    hidden = decoder.blocks[0](x, memory, encoder_outputs_mask=spad)
    _, expected = decoder.blocks[1](
        hidden, memory, encoder_outputs_mask=spad, return_attention_scores=True
    )
    assert_allclose(scores, expected, atol=1e-6)
    assert np.all(to_numpy(scores)[1, :, :, 2:] == 0)  # padded source positions
    if with_cache:
        cache = decoder.init_self_attention_cache(2, 3)
        cross = decoder.precompute_cross_attention_cache(memory)
        step, cache, step_scores = decoder(
            x[:, :1],
            encoder_outputs_mask=spad,
            self_attention_cache=cache,
            cross_attention_cache=cross,
            cache_index=0,
            return_attention_scores=True,
        )
        assert_allclose(to_numpy(step_scores)[:, :, 0], to_numpy(scores)[:, :, 0], atol=1e-5)
