import keras
import numpy as np
import pytest

from keras_transformer.models import (
    Transformer,
    cross_attention_entropy,
    encoder_position_similarity,
)
from keras_transformer.models.diagnostics import _cosine_similarity_between_positions
from tests.backends import assert_allclose, to_numpy

VOCAB = 40


def _model(norm_first=False, num_layers=2, **options):
    model = Transformer(
        num_layers,
        32,
        4,
        64,
        source_vocab_size=VOCAB,
        target_vocab_size=VOCAB,
        dropout=0.0,
        norm_first=norm_first,
        **options,
    )
    model.build(((None, None), (None, None)))
    return model


def _batch(rng):
    source = rng.integers(1, VOCAB, (3, 6))
    source[1, 3:] = 0
    source[2, 1:] = 0  # one token: no pair of positions, no entropy
    target = rng.integers(1, VOCAB, (3, 5))
    target[0, 4:] = 0
    return source, target


def _numpy_similarity(hidden, mask):
    """Mean cosine over distinct non-padding pairs, pair by pair."""
    values = []
    for sentence, keep in zip(hidden, mask):
        rows = sentence[keep]
        for i in range(len(rows)):
            for j in range(len(rows)):
                if i != j:
                    a, b = rows[i], rows[j]
                    values.append(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return float(np.mean(values))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_similarity_matches_pairwise_numpy(rng, norm_first):
    model = _model(norm_first)
    source, _ = _batch(rng)
    mask = source != 0
    values = encoder_position_similarity(model, source)
    assert len(values) == 3
    hidden = model.source_embedding(source)
    expected = [_numpy_similarity(to_numpy(hidden), mask)]
    for block in model.encoder.blocks:
        hidden = block(hidden, mask=mask, training=False)
        expected.append(_numpy_similarity(to_numpy(hidden), mask))
    # The last entry is what the decoder reads: `encode`'s output.
    encoded = to_numpy(model.encode(source, training=False))
    expected[-1] = _numpy_similarity(encoded, mask)
    assert_allclose(values, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "hidden, expected",
    [
        # one vector everywhere: collapsed
        (np.tile([[1.0, 2.0, -1.0]], (4, 1)), 1.0),
        # orthogonal and repeated positions
        (np.eye(4, 3) + np.eye(4, 3, k=-3), None),
        # a vector and its opposite
        (np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]] * 2), None),
    ],
)
def test_similarity_ignores_padding_and_the_diagonal(hidden, expected):
    hidden = hidden.astype("float32")
    mask = np.ones((1, len(hidden)), bool)
    value = _cosine_similarity_between_positions(hidden[None], mask)
    if expected is None:
        expected = _numpy_similarity(hidden[None], mask)
    assert value == pytest.approx(expected, abs=1e-6)
    # A padding position pointing anywhere changes nothing.
    padded = np.concatenate([hidden, -10 * hidden[:1]])[None]
    padded_mask = np.concatenate([mask, [[False]]], axis=1)
    assert _cosine_similarity_between_positions(padded, padded_mask) == pytest.approx(
        value, abs=1e-6
    )


def _numpy_entropy(scores, source, target):
    """Normalized entropy of each head and counted target position."""
    values = []
    for b in range(len(source)):
        length = int((source[b] != 0).sum())
        if length < 2:
            continue
        for t in np.flatnonzero(target[b] != 0):
            for head in scores[b, :, t]:
                p = head[:length]
                values.append(-(p * np.log(np.maximum(p, 1e-12))).sum() / np.log(length))
    return float(np.mean(values))


@pytest.mark.parametrize("decoder_heads", [None, 2])
def test_cross_attention_entropy_of_the_last_block_matches_the_decoder(rng, decoder_heads):
    model = _model(decoder_num_heads=decoder_heads)
    source, target = _batch(rng)
    values = cross_attention_entropy(model, source, target)
    assert len(values) == 2
    scores = model.decoder.cross_attention_scores(
        model.target_embedding(target),
        model.encode(source, training=False),
        inputs_mask=target != 0,
        encoder_outputs_mask=source != 0,
    )
    expected = _numpy_entropy(to_numpy(scores), source, target)
    assert values[-1] == pytest.approx(expected, rel=1e-4)
    assert all(0.0 <= v < 1.0 for v in values)


def test_zero_queries_attend_uniformly(rng):
    """Queries of zeros give every source token the same logit."""
    model = _model()
    for block in model.decoder.blocks:
        query = block.cross_attention._query_dense
        for weight in query.weights:
            weight.assign(keras.ops.zeros(weight.shape, weight.dtype))
    source, target = _batch(rng)
    assert cross_attention_entropy(model, source, target) == pytest.approx([1.0, 1.0], abs=1e-5)
