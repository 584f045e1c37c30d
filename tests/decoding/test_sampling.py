import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import greedy_search
from keras_transformer.decoding._common import Rules
from keras_transformer.decoding.sampling import filter_logits, sample_search

VOCAB, END = 12, 3


def _bigram(seed):
    """A random bigram model: the step function of a fixed table."""
    rng = np.random.default_rng(seed)
    table = rng.normal(scale=2.0, size=(VOCAB, VOCAB)).astype("float32")
    table[:, 0] = -50.0  # padding, which a trained model does not emit
    table = tf.constant(table)

    def step(ids, index, state):
        return tf.gather(table, ids), state

    return step


def _kept_numpy(logits, temperature, top_k, top_p):
    """Brute force: which tokens the filter keeps, from the definition."""
    logits = logits / temperature
    keep = np.ones_like(logits, bool)
    for row in range(len(logits)):
        order = np.argsort(-logits[row], kind="stable")
        if top_k:
            keep[row, order[top_k:]] = False
            keep[row, logits[row] == logits[row, order[top_k - 1]]] = True
        probs = np.exp(logits[row] - logits[row].max())
        probs[~keep[row]] = 0.0
        probs /= probs.sum()
        order = np.argsort(-probs, kind="stable")
        before = np.cumsum(probs[order]) - probs[order]
        cut = order[before >= top_p]
        if top_p < 1.0:
            keep[row, cut] = False
    return keep


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, 0, 1.0), (0.7, 3, 1.0), (1.3, 0, 0.6), (1.0, 5, 0.8), (2.0, 1, 1.0), (1.0, 0, 0.05)],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_filter_keeps_the_tokens_of_the_definition(temperature, top_k, top_p, seed):
    logits = np.random.default_rng(seed).normal(scale=2.0, size=(4, VOCAB)).astype("float32")
    kept = filter_logits(tf.constant(logits), temperature, top_k, top_p).numpy() > -np.inf
    assert kept.any(axis=-1).all()
    expected = _kept_numpy(logits.astype("float64"), temperature, top_k, top_p)
    np.testing.assert_array_equal(kept, expected)


def test_temperature_scales_the_kept_logits():
    logits = tf.constant([[1.0, 2.0, 4.0]])
    np.testing.assert_allclose(filter_logits(logits, temperature=2.0).numpy(), [[0.5, 1.0, 2.0]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_k_of_one_is_greedy_search(seed):
    step = _bigram(seed)
    start = tf.constant([0, 1, 2, 4, 5])
    options = dict(max_length=9, rules=Rules(end_id=END, alpha=0.6))
    greedy = greedy_search(step, start, {}, **options)
    sampled = sample_search(step, start, {}, top_k=1, temperature=0.3, **options)
    np.testing.assert_array_equal(sampled[0].numpy(), greedy[0].numpy())
    np.testing.assert_array_equal(sampled[1].numpy(), greedy[1].numpy())


def test_draws_follow_the_filtered_distribution():
    step = _bigram(3)
    rows = 20_000
    start = tf.fill([rows], 5)
    sequences, _ = sample_search(
        step,
        start,
        {},
        max_length=1,
        rules=Rules(end_id=END),
        temperature=1.5,
        top_k=4,
        top_p=0.9,
        seed=7,
    )
    first = sequences.numpy()[:, 0, 0]
    logits = step(tf.constant([5]), 0, {})[0]
    probs = tf.nn.softmax(filter_logits(logits, 1.5, 4, 0.9)).numpy()[0]
    frequencies = np.bincount(first, minlength=VOCAB) / rows
    assert set(np.flatnonzero(frequencies)) <= set(np.flatnonzero(probs))
    np.testing.assert_allclose(frequencies, probs, atol=0.015)


def test_scores_are_the_models_log_probabilities_of_the_sample():
    step = _bigram(4)
    sequences, scores = sample_search(
        step,
        tf.constant([1, 2]),
        {},
        max_length=6,
        rules=Rules(end_id=END, alpha=0.0),
        temperature=3.0,
        seed=1,
    )
    table = tf.nn.log_softmax(step(tf.range(VOCAB), 0, {})[0]).numpy()
    for row, previous in enumerate([1, 2]):
        total = 0.0
        for token in sequences.numpy()[row, 0]:
            if token == 0:
                break
            total += table[previous, token]
            previous = token
        assert scores.numpy()[row, 0] == pytest.approx(total, abs=1e-4)


def test_a_seed_repeats_and_no_seed_draws_anew():
    step = _bigram(5)
    start = tf.fill([64], 1)
    options = dict(max_length=8, rules=Rules(end_id=END), temperature=2.0)
    first = sample_search(step, start, {}, seed=11, **options)[0].numpy()
    again = sample_search(step, start, {}, seed=11, **options)[0].numpy()
    np.testing.assert_array_equal(first, again)
    fresh = [sample_search(step, start, {}, **options)[0].numpy() for _ in range(2)]
    assert not np.array_equal(fresh[0], fresh[1])


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(temperature=0.0), "`temperature` must be a finite number > 0"),
        (dict(temperature=float("inf")), "`temperature` must be a finite number > 0"),
        (dict(temperature=True), "`temperature` must be a number"),
        (dict(top_k=True), "`top_k` must be an int >= 0"),
        (dict(temperature="hot"), "`temperature` must be a number"),
        (dict(top_k=-1), "`top_k` must be an int >= 0"),
        (dict(top_p=0.0), r"`top_p` must be in \(0, 1\]"),
        (dict(top_p=1.5), r"`top_p` must be in \(0, 1\]"),
        (dict(seed=1.5), "`seed` must be an int"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        sample_search(_bigram(0), tf.constant([1]), {}, max_length=3, rules=Rules(end_id=END),
                      **options)  # fmt: skip
