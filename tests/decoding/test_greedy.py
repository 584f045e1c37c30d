import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search, greedy_search
from keras_transformer.decoding._common import Prefix, Rules
from keras_transformer.decoding.sampling import sample_search
from tests.decoding.scripted import markov_step_fn

START, END = 1, 3


def _numpy_greedy(table, row, max_length, alpha):
    """The argmax path of one row and its GNMT-normalized score."""
    log_probs = table[row] - np.log(np.exp(table[row]).sum(-1, keepdims=True))
    path, total, last = [], 0.0, START
    for i in range(max_length):
        token = int(np.argmax(log_probs[i, last]))
        total += log_probs[i, last, token]
        path.append(token)
        last = token
        if token == END:
            break
    score = total / ((5 + len(path)) / 6) ** alpha
    return path + [0] * (max_length - len(path)), score


def _greedy(table, max_length, alpha=0.6):
    batch = table.shape[0]
    return greedy_search(
        markov_step_fn(table),
        tf.fill([batch], START),
        {"row": tf.range(batch)},
        max_length=max_length,
        rules=Rules(end_id=END, alpha=alpha),
    )


@pytest.mark.parametrize("alpha", [0.0, 0.6])
@pytest.mark.parametrize("seed", range(4))
def test_matches_numpy_argmax_path(alpha, seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(3, 6, 7, 7)) * 3.0
    table[..., END] += 1.0  # some rows end early, some never
    sequences, scores = _greedy(table, 6, alpha)
    assert sequences.shape == (3, 1, 6) and scores.shape == (3, 1)
    for row in range(3):
        path, score = _numpy_greedy(table, row, 6, alpha)
        assert list(sequences[row, 0].numpy()) == path
        assert scores[row, 0].numpy() == pytest.approx(score, abs=1e-4)


def test_greedy_misses_what_a_beam_finds():
    # Token 4 is the better first step (log 0.6 against log 0.4), but every
    # continuation after it is poor; after 5 the end is certain.
    vocab, length = 6, 3
    table = np.full((1, length, vocab, vocab), -30.0)
    table[0, 0, START, 4], table[0, 0, START, 5] = np.log(0.6), np.log(0.4)
    table[0, 1, 4, :] = 0.0  # uniform: log(1/6) for each token
    table[0, 1, 5, END] = 0.0
    greedy, _ = _greedy(table, length, alpha=0.0)
    beam, _ = beam_search(
        markov_step_fn(table),
        tf.constant([START]),
        {"row": tf.range(1)},
        beam_size=2,
        max_length=length,
        rules=Rules(end_id=END, alpha=0.0),
    )
    assert list(greedy[0, 0].numpy())[:1] == [4]
    assert list(beam[0, 0].numpy()) == [5, END, 0]


def test_stops_when_every_row_has_ended():
    paths = [[4, END], [5, 4, 4, END]]
    vocab, max_length = 6, 10
    table = np.full((2, max_length, vocab, vocab), -20.0)
    for row, path in enumerate(paths):
        last = START
        for i, token in enumerate(path):
            table[row, i, last, token] = 10.0
            last = token
    calls = tf.Variable(0)
    step = markov_step_fn(table)

    def counting_step(ids, index, state):
        calls.assign_add(1)
        return step(ids, index, state)

    search = tf.function(
        lambda: greedy_search(
            counting_step,
            tf.fill([2], START),
            {"row": tf.range(2)},
            max_length=max_length,
            rules=Rules(end_id=END),
        )
    )
    sequences, _ = search()
    assert int(calls.numpy()) == 4  # the longest row's length, not max_length
    assert list(sequences[0, 0].numpy()) == [4, END] + [0] * 8


@pytest.mark.parametrize("name", ["beam_size", "beams"])
def test_an_unknown_argument_is_a_type_error(name):
    args = (markov_step_fn(np.zeros((1, 3, 5, 5))), tf.constant([START]), {"row": tf.range(1)})
    with pytest.raises(TypeError, match=name):
        greedy_search(*args, max_length=3, rules=Rules(end_id=END), **{name: 1})


def test_the_loop_state_is_named():
    from keras_transformer.decoding.beam_search import BeamState
    from keras_transformer.decoding.greedy import GreedyState

    assert "finished_flags" in BeamState._fields and "lengths" in GreedyState._fields


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(max_length=0), "max_length"),
        (dict(end_id=-1), "end_id"),
        (dict(alpha=float("inf")), "alpha"),
        (dict(max_length=2.5), "max_length"),
    ],
)
def test_invalid_arguments(kwargs, match):
    rules = {"end_id": END, "alpha": 0.6, **kwargs}
    max_length = rules.pop("max_length", 3)
    with pytest.raises(ValueError, match=match):
        greedy_search(
            markov_step_fn(np.zeros((1, 3, 5, 5))),
            tf.constant([START]),
            {"row": tf.range(1)},
            max_length=max_length,
            rules=Rules(**rules),
        )


@pytest.mark.parametrize("renormalize", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_banned_token_and_forced_end(seed, renormalize):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(2, 4, 6, 6)) * 2.0
    table[..., 0] += 30.0  # padding would win every step
    table[..., END] -= 30.0  # and no row would end by itself
    sequences, scores = greedy_search(
        markov_step_fn(table), tf.fill([2], START), {"row": tf.range(2)}, max_length=4,
        rules=Rules(end_id=END, alpha=1.0, length_penalty="power", banned_ids=(0,),
                    forced_end=True, renormalize=renormalize),
    )  # fmt: skip
    # Renormalized, the softmax is over the tokens left; else padding's
    # share (nearly all of it here) is lost.
    counted = np.exp(table)
    if renormalize:
        counted[..., 0] = 0.0
    log_probs = table - np.log(counted.sum(-1, keepdims=True))
    for row in range(2):
        path, total, last = [], 0.0, START
        for i in range(3):
            allowed = log_probs[row, i, last].copy()
            allowed[0] = -np.inf
            token = int(np.argmax(allowed))
            total += allowed[token]
            path.append(token)
            last = token
        assert list(sequences[row, 0].numpy()) == path + [END]
        assert scores[row, 0].numpy() == pytest.approx(total / 4, abs=1e-4)


def _rule_greedy(table, row, max_length, banned, suppressed, prefix):
    """The argmax path of one row in NumPy: the prefix's tokens, then at
    each step the most likely token the rules allow (not banned, not the
    last of a suppressed sequence whose others precede it)."""
    path, last = [], START
    for i in range(max_length):
        if i < len(prefix):
            token = prefix[i]
        else:
            scores = table[row, i, last].copy()
            scores[list(banned)] = -np.inf
            for s in suppressed:
                if len(path) >= len(s) - 1 and tuple(path[len(path) - len(s) + 1 :]) == s[:-1]:
                    scores[s[-1]] = -np.inf
            token = int(np.argmax(scores))
        path.append(token)
        last = token
        if token == END:
            break
    return path + [0] * (max_length - len(path))


@pytest.mark.parametrize("search", ["greedy", "sampling top_k=1"])
@pytest.mark.parametrize("seed", range(3))
def test_suppressed_sequences_and_a_prefix_in_the_token_by_token_searches(search, seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(3, 5, 6, 6)) * 3.0
    table[..., 4] += 2.0  # the suppressed word's tokens are likely
    rules = Rules(end_id=END, alpha=0.0, banned_ids=(0, 5), suppressed=((4, 4), (2, 4, 2)))
    prefixes = [(), (4,), (2, 4)]
    prefix = Prefix(
        tf.constant([list(p) + [0] * (5 - len(p)) for p in prefixes]),
        tf.constant([len(p) for p in prefixes]),
    )
    args = (markov_step_fn(table), tf.fill([3], START), {"row": tf.range(3)})
    if search == "greedy":
        sequences, _ = greedy_search(*args, max_length=5, rules=rules, prefix=prefix)
    else:
        sequences, _ = sample_search(*args, max_length=5, rules=rules, prefix=prefix, top_k=1)
    for row, forced in enumerate(prefixes):
        want = _rule_greedy(table, row, 5, (0, 5), ((4, 4), (2, 4, 2)), forced)
        assert sequences[row, 0].numpy().tolist() == want


def test_sampling_never_draws_a_suppressed_sequence():
    table = np.zeros((1, 6, 6, 6))
    table[..., 4] = 3.0  # 4 after 4 is drawn often unless suppressed
    table[..., 0] = -30.0
    rules = Rules(end_id=END, suppressed=((4, 4),), banned_ids=(2,))
    sequences, _ = sample_search(
        markov_step_fn(np.repeat(table, 256, axis=0)), tf.fill([256], START),
        {"row": tf.range(256)}, max_length=6, rules=rules, seed=3,
    )  # fmt: skip
    drawn = sequences.numpy()[:, 0]
    assert not np.any((drawn[:, 1:] == 4) & (drawn[:, :-1] == 4))
    assert not np.any(drawn == 2)
    assert np.sum(drawn == 4) > 100  # the word's token alone is still drawn
