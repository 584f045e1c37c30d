"""Property-based checks (hypothesis) over random shapes, lengths and seeds:
padding never changes the outputs of real positions, and no decoder
position sees the future."""

import keras
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_transformer.layers import Decoder, Encoder
from tests.backends import assert_allclose, to_numpy

D = 8
# JAX and PyTorch compile each op for every new shape: fewer draws there.
PROPERTY = settings(
    max_examples={"tensorflow": 20, "torch": 6}.get(keras.backend.backend(), 3), deadline=None
)


def _stack(cls, heads, norm_first, seed):
    return cls(
        2,
        D,
        heads,
        16,
        dropout=0.0,
        norm_first=norm_first,
        kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
        bias_initializer=keras.initializers.RandomNormal(stddev=0.1, seed=seed),
    )


def _pad(x, extra, rng):
    """`x` followed by `extra` positions of noise: padding need not be zero."""
    noise = rng.normal(size=(x.shape[0], extra, D)).astype("float32")
    return np.concatenate([x, noise], axis=1)


def _mask(batch, length, extra):
    return np.concatenate([np.ones((batch, length), bool), np.zeros((batch, extra), bool)], 1)


shapes = dict(
    batch=st.integers(1, 3),
    length=st.integers(1, 7),
    extra=st.integers(1, 5),
    heads=st.sampled_from([1, 2, 4]),
    norm_first=st.booleans(),
    seed=st.integers(0, 2**16),
)


@PROPERTY
@given(**shapes)
def test_encoder_ignores_padding(batch, length, extra, heads, norm_first, seed):
    rng = np.random.default_rng(seed)
    encoder = _stack(Encoder, heads, norm_first, seed)
    x = rng.normal(size=(batch, length, D)).astype("float32")
    alone = to_numpy(encoder(x, mask=np.ones((batch, length), bool)))
    padded = to_numpy(encoder(_pad(x, extra, rng), mask=_mask(batch, length, extra)))
    assert_allclose(padded[:, :length], alone, atol=1e-4)


@PROPERTY
@given(source_length=st.integers(1, 7), **shapes)
def test_decoder_ignores_target_and_source_padding(
    batch, length, extra, heads, norm_first, seed, source_length
):
    rng = np.random.default_rng(seed)
    decoder = _stack(Decoder, heads, norm_first, seed)
    x = rng.normal(size=(batch, length, D)).astype("float32")
    memory = rng.normal(size=(batch, source_length, D)).astype("float32")
    alone = to_numpy(decoder(x, memory))
    padded = to_numpy(
        decoder(
            _pad(x, extra, rng),
            _pad(memory, extra, rng),
            inputs_mask=_mask(batch, length, extra),
            encoder_outputs_mask=_mask(batch, source_length, extra),
        )
    )
    assert_allclose(padded[:, :length], alone, atol=1e-4)


@PROPERTY
@given(cut=st.integers(1, 6), **shapes)
def test_decoder_positions_never_see_the_future(batch, length, extra, heads, norm_first, seed, cut):
    rng = np.random.default_rng(seed)
    decoder = _stack(Decoder, heads, norm_first, seed)
    total = length + extra
    cut = min(cut, total - 1)
    x = rng.normal(size=(batch, total, D)).astype("float32")
    memory = rng.normal(size=(batch, 5, D)).astype("float32")
    changed = x.copy()
    changed[:, cut:] = rng.normal(size=(batch, total - cut, D))
    before, after = to_numpy(decoder(x, memory)), to_numpy(decoder(changed, memory))
    assert_allclose(after[:, :cut], before[:, :cut], atol=1e-4)
    assert not np.allclose(after[:, cut:], before[:, cut:], atol=1e-4)
