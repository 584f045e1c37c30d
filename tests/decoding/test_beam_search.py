import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search, greedy_search
from keras_transformer.decoding._common import Prefix, Rules
from keras_transformer.models import Transformer
from tests.decoding.scripted import brute_force, markov_step_fn

START, END = 1, 3


def _search(table, beam_size, alpha, max_length, prefix=None, **rules):
    batch = table.shape[0]
    return beam_search(
        markov_step_fn(table),
        tf.fill([batch], START),
        {"row": tf.range(batch)},
        beam_size=beam_size,
        max_length=max_length,
        rules=Rules(end_id=END, alpha=alpha, **rules),
        prefix=prefix,
    )


# A negative alpha favours short hypotheses: the stopping bound is then
# the current length's penalty, not the longest's.
@pytest.mark.parametrize("alpha", [-0.8, 0.0, 0.6, 1.2])
@pytest.mark.parametrize("seed", range(4))
def test_wide_beam_matches_brute_force(alpha, seed):
    rng = np.random.default_rng(seed)
    batch, length, vocab = 3, 4, 5
    table = rng.normal(size=(batch, length, vocab, vocab)) * 2.0
    sequences, scores = _search(table, vocab**length, alpha, length)
    for row in range(batch):
        ranked = brute_force(table, row, START, END, length, alpha)
        finished = [r for r in ranked if r[1]]
        for rank in range(3):
            assert list(sequences[row, rank].numpy()) == finished[rank][2]
            assert scores[row, rank].numpy() == pytest.approx(finished[rank][0], abs=1e-4)


@pytest.mark.parametrize(
    "options",
    [
        dict(length_penalty="power"),
        dict(length_penalty="power", banned_ids=(0,), forced_end=True),
        dict(length_penalty="gnmt", banned_ids=(2,), forced_end=True),
        dict(length_penalty="power", banned_ids=(0,), forced_end=True, renormalize=True),
        dict(length_penalty="gnmt", banned_ids=(0, 4), renormalize=True),
    ],
)
@pytest.mark.parametrize("alpha", [-1.0, 0.0, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_penalty_forms_and_rules_match_brute_force(options, alpha, seed):
    rng = np.random.default_rng(seed)
    batch, length, vocab = 2, 4, 5
    table = rng.normal(size=(batch, length, vocab, vocab)) * 2.0
    sequences, scores = _search(table, vocab**length, alpha, length, **options)
    reference = dict(
        penalty=options["length_penalty"],
        banned=options.get("banned_ids", ()),
        forced_end=options.get("forced_end", False),
        renormalize=options.get("renormalize", False),
    )
    for row in range(batch):
        ranked = brute_force(table, row, START, END, length, alpha, **reference)
        finished = [r for r in ranked if r[1]]
        for rank in range(3):
            assert list(sequences[row, rank].numpy()) == finished[rank][2]
            assert scores[row, rank].numpy() == pytest.approx(finished[rank][0], abs=1e-4)


def test_power_penalty_stops_as_generate_does():
    # After the first step the finished END (log p ≈ -0.31) beats the alive
    # hypothesis scored at the current length (-1.31 / 1): generate()'s
    # heuristic stops there, though [4, END] scores better at its own
    # length under a large exponent (-1.31 / 2**3 ≈ -0.16).
    table = np.full((1, 3, 5, 5), -20.0)
    table[0, 0, START, END] = 0.0
    table[0, 0, START, 4] = -1.0
    table[0, 1, 4, END] = 0.0
    sequences, scores = _search(table, 1, 3.0, 3, length_penalty="power")
    assert list(sequences[0, 0].numpy()) == [END, 0, 0]
    log_p = table[0, 0, START] - np.log(np.exp(table[0, 0, START]).sum())
    assert scores[0, 0].numpy() == pytest.approx(log_p[END], abs=1e-5)
    assert log_p[4] / 2**3.0 > log_p[END]  # the longer one would have won


def test_a_negative_alpha_searches_on_while_a_longer_hypothesis_can_win():
    # With alpha < 0, GNMT's penalty shrinks as hypotheses grow. After two
    # steps [END] and [4, END] have finished and [4, 6] is alive; ended next,
    # [4, 6, END] beats both. A bound taken at the longest length (10) says
    # it cannot, and would stop there.
    alpha, max_length = -3.0, 10
    table = np.full((1, max_length, 8, 8), -30.0)
    table[0, 0, START, [4, END, 5]] = np.log([0.8, 0.15, 0.05])
    table[0, 1, 4, [6, END]] = np.log([0.7, 0.3])
    table[0, 2, 6, END] = 0.0
    sequences, scores = _search(table, 2, alpha, max_length)
    log_p = table[0] - np.log(np.exp(table[0]).sum(-1, keepdims=True))
    best = log_p[0, START, 4] + log_p[1, 4, 6] + log_p[2, 6, END]
    penalty = ((5 + np.arange(max_length + 1)) / 6) ** alpha
    assert list(sequences[0, 0].numpy()) == [4, 6, END] + [0] * 7
    assert scores[0, 0].numpy() == pytest.approx(best / penalty[3], abs=1e-4)
    # What the bound at the longest length compared after two steps:
    worst_finished = (log_p[0, START, 4] + log_p[1, 4, END]) / penalty[2]
    alive = log_p[0, START, 4] + log_p[1, 4, 6]
    assert worst_finished >= alive / penalty[max_length] and best / penalty[3] > worst_finished


def test_unknown_penalty_form():
    with pytest.raises(ValueError, match="length_penalty.*'linear'"):
        _search(np.zeros((1, 2, 5, 5)), 2, 1.0, 2, length_penalty="linear")


def _script(batch, length, vocab, paths):
    """Logits that make `paths[row]` (ending with END) far more likely."""
    table = np.zeros((batch, length, vocab, vocab))
    for row, path in enumerate(paths):
        previous = START
        for i, token in enumerate(path):
            table[row, i, previous, token] = 10.0
            previous = token
    return table


def test_scripted_best_paths_in_a_mixed_length_batch():
    paths = [[4, 5, END], [END], [6, 4, 6, 5, 4, END]]
    table = _script(3, 8, 7, paths)
    sequences, scores = _search(table, 3, 0.6, 8)
    for row, path in enumerate(paths):
        assert list(sequences[row, 0].numpy()) == path + [0] * (8 - len(path))
    assert np.all(np.diff(scores.numpy(), axis=1) <= 1e-6)  # best first


def test_finished_hypotheses_are_never_extended_and_zero_padded():
    table = _script(2, 6, 6, [[4, END], [5, 5, END]])
    sequences, _ = _search(table, 4, 0.6, 6)
    for row in sequences.numpy().reshape(-1, 6):
        ends = np.where(row == END)[0]
        if len(ends):
            assert np.all(row[ends[0] + 1 :] == 0)


def test_length_penalty_prefers_longer_when_alpha_is_large():
    # Two finished options: short [END] with log p = log 0.55 and long [4, END]
    # with log p = log 0.45 + log 1. Alpha decides.
    vocab, length = 5, 3
    table = np.full((1, length, vocab, vocab), -30.0)
    table[0, 0, START, END] = np.log(0.55)
    table[0, 0, START, 4] = np.log(0.45)
    table[0, 1, 4, END] = 0.0
    short = [END, 0, 0]
    long = [4, END, 0]
    seq, _ = _search(table, 2, 0.0, length)
    assert list(seq[0, 0].numpy()) == short
    seq, _ = _search(table, 2, 3.0, length)
    assert list(seq[0, 0].numpy()) == long


def test_rows_that_never_end_return_alive_hypotheses():
    vocab, length = 5, 4
    table = np.zeros((2, length, vocab, vocab))
    table[:, :, :, END] = -50.0
    table[:, :, :, 0] = -50.0  # padding is never generated
    sequences, scores = _search(table, 2, 0.6, length)
    assert np.all(sequences.numpy() != 0) and np.all(np.isfinite(scores.numpy()))


def test_stops_once_no_alive_beam_can_beat_the_worst_finished():
    # The end token is likely after anything, so both beams have finished
    # after two steps and no continuation can catch up within max_length.
    vocab, max_length = 6, 10
    table = np.full((1, max_length, vocab, vocab), -30.0)
    table[..., END], table[..., 4], table[..., 5] = 0.0, -5.0, -6.0
    calls = tf.Variable(0)
    step = markov_step_fn(table)

    def counting_step(ids, index, state):
        calls.assign_add(1)
        return step(ids, index, state)

    search = tf.function(
        lambda: beam_search(
            counting_step,
            tf.constant([START]),
            {"row": tf.range(1)},
            beam_size=2,
            max_length=max_length,
            rules=Rules(end_id=END, alpha=0.6),
        )
    )
    sequences, scores = search()
    assert int(calls.numpy()) == 2
    assert [list(s) for s in sequences[0].numpy()] == [[END] + [0] * 9, [4, END] + [0] * 8]
    assert scores[0, 0] > scores[0, 1]


@pytest.mark.parametrize("seed", range(5))
def test_one_beam_equals_greedy(seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(4, 6, 7, 7)) * 3.0
    args = (markov_step_fn(table), tf.fill([4], START), {"row": tf.range(4)})
    rules = Rules(end_id=END, alpha=0.0)
    beam = beam_search(*args, beam_size=1, max_length=6, rules=rules)
    greedy = greedy_search(*args, max_length=6, rules=rules)
    np.testing.assert_array_equal(beam[0], greedy[0])
    np.testing.assert_allclose(beam[1], greedy[1], atol=1e-5)


def test_batch_rows_are_independent():
    rng = np.random.default_rng(3)
    table = rng.normal(size=(3, 5, 6, 6)) * 2.0
    together, together_scores = _search(table, 3, 0.6, 5)
    for row in range(3):
        alone, alone_scores = _search(table[row : row + 1], 3, 0.6, 5)
        np.testing.assert_array_equal(together[row], alone[0])
        np.testing.assert_allclose(together_scores[row], alone_scores[0], atol=1e-5)


def test_the_first_step_runs_on_one_beam_a_row():
    # Every beam starts from the start token: the first step runs once a
    # row, and its state is tiled over the beams (the brute-force tests
    # hold the results).
    table = np.random.default_rng(5).normal(size=(2, 4, 6, 6))
    markov, rows = markov_step_fn(table), []

    def step(ids, index, state):
        rows.append(int(ids.shape[0]))
        return markov(ids, index, state)

    beam_search(step, tf.fill([2], START), {"row": tf.range(2)}, beam_size=3, max_length=4,
                rules=Rules(end_id=END))  # fmt: skip
    assert rows[0] == 2 and len(rows) > 1 and set(rows[1:]) == {6}


def test_transformer_beam_search_with_cache_equals_without():
    keras.utils.set_random_seed(0)
    model = Transformer(2, 32, 4, 64, 30, 30, dropout=0.0)
    rng = np.random.default_rng(0)
    context = rng.integers(4, 30, (3, 6))
    context[1, 3:] = 0
    max_length = 7
    state = model.init_decoding_state(context, max_length)
    # A fresh model's logits are nearly flat, so hypotheses can tie to 1e-7
    # and the two paths' rounding pick differently; spread them apart.
    kernel, bias = model.output_projection.get_weights()
    model.output_projection.set_weights([kernel * 10.0, bias])

    def uncached_step(ids, index, state):
        # The whole prefix again at every step; positions after `index` are
        # zeros, which the causal mask keeps out of position `index`.
        at = tf.range(max_length)[None, :] == index
        history = tf.where(at, ids[:, None], state["history"])
        logits = tf.gather(model((state["context"], history)), index, axis=1)
        return logits, {"history": history, "context": state["context"]}

    cached = beam_search(
        model.decode_step, tf.fill([3], 2), state, beam_size=3, max_length=max_length,
        rules=Rules(end_id=3),
    )  # fmt: skip
    uncached = beam_search(
        uncached_step,
        tf.fill([3], 2),
        {"history": tf.zeros([3, max_length], tf.int32), "context": tf.constant(context)},
        beam_size=3,
        max_length=max_length,
        rules=Rules(end_id=3),
    )
    np.testing.assert_array_equal(cached[0], uncached[0])
    np.testing.assert_allclose(cached[1], uncached[1], atol=1e-4)


def test_whole_search_is_one_graph():
    table = np.random.default_rng(0).normal(size=(2, 5, 6, 6))
    fn = tf.function(lambda: _search(table, 2, 0.6, 5))
    graph = fn.get_concrete_function().graph
    ops = {op.type for op in graph.get_operations()}
    assert "While" in ops or "StatelessWhile" in ops


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(beam_size=0), "beam_size"),
        (dict(max_length=0), "max_length"),
        (dict(end_id=-1), "end_id"),
        (dict(alpha=float("-inf")), "`alpha` must be a finite number"),
        (dict(alpha=float("nan")), "`alpha` must be a finite number"),
        (dict(banned_ids=(-2,)), "banned_ids"),
        (dict(suppressed=((4,),)), "two or more ids"),
        (dict(rules="gnmt"), "must be a `Rules`"),
    ],
)
def test_invalid_arguments(kwargs, match):
    sizes = dict(beam_size=2, max_length=3)
    sizes.update({k: v for k, v in kwargs.items() if k in sizes})
    rules = {k: v for k, v in kwargs.items() if k not in sizes and k != "rules"}
    with pytest.raises(ValueError, match=match):
        beam_search(
            markov_step_fn(np.zeros((1, 3, 5, 5))),
            tf.constant([START]),
            {"row": tf.range(1)},
            rules=kwargs.get("rules", Rules(**{"end_id": END, "alpha": 0.6, **rules})),
            **sizes,
        )


def test_numpy_integers_are_accepted():
    table = np.random.default_rng(1).normal(size=(2, 4, 6, 6))
    want = _search(table, 2, 0.6, 4)
    got = beam_search(
        markov_step_fn(table),
        tf.fill([2], START),
        {"row": tf.range(2)},
        beam_size=np.int64(2),
        max_length=np.int32(4),
        rules=Rules(end_id=np.int64(END), alpha=np.float32(0.6)),
    )
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], atol=1e-6)


# Suppressed sequences (of one token and of two or three) and a target
# prefix, each row its own, against every hypothesis enumerated with the
# same rules.
@pytest.mark.parametrize(
    "rules",
    [
        dict(suppressed=((4, 2), (2, 2, 4))),
        dict(suppressed=((4, 2),), banned_ids=(0,), renormalize=True),
        dict(suppressed=((END, 4),), banned_ids=(2,), length_penalty="power"),
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_suppressed_sequences_match_brute_force(rules, seed):
    rng = np.random.default_rng(seed)
    batch, length, vocab = 2, 4, 5
    table = rng.normal(size=(batch, length, vocab, vocab)) * 2.0
    sequences, scores = _search(table, vocab**length, 0.6, length, **rules)
    reference = dict(
        penalty=rules.get("length_penalty", "gnmt"),
        banned=rules.get("banned_ids", ()),
        renormalize=rules.get("renormalize", False),
        suppressed=rules["suppressed"],
    )
    for row in range(batch):
        finished = [r for r in brute_force(table, row, START, END, length, 0.6, **reference)
                    if r[1]]  # fmt: skip
        for rank in range(3):
            assert list(sequences[row, rank].numpy()) == finished[rank][2]
            assert scores[row, rank].numpy() == pytest.approx(finished[rank][0], abs=1e-4)


@pytest.mark.parametrize("beam_size", [1, 3, 5**4])
@pytest.mark.parametrize("seed", range(3))
def test_target_prefix_matches_brute_force(beam_size, seed):
    rng = np.random.default_rng(seed)
    batch, length, vocab = 3, 4, 5
    table = rng.normal(size=(batch, length, vocab, vocab)) * 2.0
    # A row without a prefix searches freely; the first forces a suppressed
    # sequence (a prefix is the user's, over every rule).
    prefixes = [(2, 4), (), (4, 2)]
    ids = tf.constant([list(p) + [0] * (length - len(p)) for p in prefixes], tf.int32)
    lengths = tf.constant([len(p) for p in prefixes], tf.int32)
    rules = dict(suppressed=((2, 4),), banned_ids=(0,))
    sequences, scores = _search(table, beam_size, 0.6, length, Prefix(ids, lengths), **rules)
    for row, prefix in enumerate(prefixes):
        ranked = brute_force(table, row, START, END, length, 0.6, banned=(0,),
                             suppressed=((2, 4),), prefix=prefix)  # fmt: skip
        finished = [r for r in ranked if r[1]]
        got = sequences[row, 0].numpy().tolist()
        assert got[: len(prefix)] == list(prefix)
        if beam_size == 5**4:  # a search as wide as the enumeration
            for rank in range(3):
                assert sequences[row, rank].numpy().tolist() == finished[rank][2]
                assert scores[row, rank].numpy() == pytest.approx(finished[rank][0], abs=1e-4)
        # Every hypothesis returned is one the rules allow, scored as such.
        allowed = {tuple(r[2]): r[0] for r in ranked}
        for rank in range(min(beam_size, 3)):
            hypothesis = tuple(sequences[row, rank].numpy().tolist())
            assert hypothesis in allowed
            assert scores[row, rank].numpy() == pytest.approx(allowed[hypothesis], abs=1e-4)


def test_a_prefix_s_junk_beams_never_finish():
    # While a prefix is forced, one beam a row holds the only finite
    # hypothesis: the others' endings (about -1e9) must not fill the
    # finished set.
    table = _script(1, 6, 6, [[4, 5, END]])
    prefix = Prefix(tf.constant([[4, 5, 0, 0, 0, 0]]), tf.constant([2]))
    sequences, scores = _search(table, 4, 0.6, 6, prefix)
    assert sequences[0, 0].numpy().tolist() == [4, 5, END, 0, 0, 0]
    assert np.all(scores.numpy() > -1e6)
