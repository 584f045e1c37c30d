"""Every public layer under the same contract (see `tests.layers.contract`)."""

import numpy as np
import pytest

from keras_transformer.layers import (
    Decoder,
    DecoderBlock,
    Encoder,
    EncoderBlock,
    FeedForward,
    MultiHeadAttention,
    PositionalEmbedding,
)
from tests.layers import contract

D = 8


def _embedded(batch, length, pad_from, seed):
    """Float inputs whose rows from `pad_from[b]` on are zero (padding)."""
    x = np.random.default_rng(seed).normal(size=(batch, length, D)).astype("float32")
    x[np.arange(length)[None, :] >= np.array(pad_from)[:, None]] = 0.0
    return x


TARGET = _embedded(2, 5, [5, 3], seed=1)
SOURCE = _embedded(2, 6, [4, 6], seed=2)
IDS = np.array([[5, 6, 7, 0], [9, 0, 0, 0]], "int32")

# Arguments away from their defaults, so that the config round trip and
# the saved model check each of them.
CASES = {
    "MultiHeadAttention": contract.LayerCase(
        lambda **kw: MultiHeadAttention(
            2, 4, value_dim=5, dropout=0.2, use_bias=False, kernel_initializer="he_normal", **kw
        ),
        (TARGET, SOURCE),
    ),
    "PositionalEmbedding": contract.LayerCase(
        lambda **kw: PositionalEmbedding(
            20, D, max_length=12, position_encoding="learned", scale_embeddings=False, **kw
        ),
        (IDS,),
    ),
    "FeedForward": contract.LayerCase(
        lambda **kw: FeedForward(D, 16, dropout=0.2, activation="gelu", **kw), (TARGET,)
    ),
    "EncoderBlock": contract.LayerCase(
        lambda **kw: EncoderBlock(D, 2, 16, dropout=0.2, norm_first=True, activation="gelu", **kw),
        (SOURCE,),
    ),
    "DecoderBlock": contract.LayerCase(
        lambda **kw: DecoderBlock(D, 2, 16, dropout=0.2, norm_first=True, **kw), (TARGET, SOURCE)
    ),
    "Encoder": contract.LayerCase(
        lambda **kw: Encoder(2, D, 2, 16, norm_first=True, layer_norm_epsilon=1e-5, **kw),
        (SOURCE,),
    ),
    "Decoder": contract.LayerCase(
        lambda **kw: Decoder(2, D, 2, 16, dropout=0.3, norm_first=True, **kw), (TARGET, SOURCE)
    ),
}
NAMES = sorted(CASES)


def test_every_public_layer_is_under_the_contract():
    import keras_transformer.layers as layers

    public = {n for n in layers.__all__ if isinstance(getattr(layers, n), type)}
    assert public == set(CASES)


@pytest.mark.parametrize("name", NAMES)
def test_config_round_trip(name):
    contract.check_config_round_trip(CASES[name])


@pytest.mark.parametrize("name", NAMES)
def test_saves_and_loads_in_a_keras_file(name, tmp_path):
    contract.check_saved_model(CASES[name], tmp_path)


@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 1e-2), ("mixed_bfloat16", 6e-2)])
@pytest.mark.parametrize("name", NAMES)
def test_mixed_precision(name, policy, tolerance):
    contract.check_mixed_precision(CASES[name], policy, tolerance)


@pytest.mark.parametrize("name", NAMES)
def test_mask_propagates(name):
    contract.check_mask_propagation(CASES[name])
