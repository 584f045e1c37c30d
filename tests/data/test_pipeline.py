import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import (
    END_ID,
    START_ID,
    SubwordTokenizer,
    length_stats,
    make_batches,
    tokenize_pairs,
)
from keras_transformer.data.synthetic import generate_pairs


@pytest.fixture(scope="module")
def setup():
    pairs = generate_pairs(600, seed=11)
    src = SubwordTokenizer.train([a for a, _ in pairs], 300)
    tgt = SubwordTokenizer.train([b for _, b in pairs], 300)
    dataset = tf.data.Dataset.from_tensor_slices(([a for a, _ in pairs], [b for _, b in pairs]))
    return pairs, src, tgt, dataset


def test_batches_are_framed_and_masked(setup):
    pairs, src, tgt, dataset = setup
    batches = make_batches(
        dataset, src, tgt, batch_tokens=600, max_length=200, shuffle=False, cache=False
    )
    seen = 0
    for (context, target_in), target_out in batches:
        context, target_in, target_out = context.numpy(), target_in.numpy(), target_out.numpy()
        assert target_in.shape == target_out.shape and context.shape[0] == target_in.shape[0]
        # Token budget: padded size of the longer side stays within budget.
        assert (
            context.shape[0] * max(context.shape[1], target_in.shape[1]) <= 600
            or context.shape[0] == 1
        )
        assert np.all(target_in[:, 0] == START_ID)
        # target_out is target_in shifted left by one, ending with END.
        np.testing.assert_array_equal(
            target_in[:, 1:], target_out[:, :-1] * (target_in[:, 1:] != 0)
        )
        for row_in, row_out, row_ctx in zip(target_in, target_out, context):
            n = int((row_out != 0).sum())
            assert row_out[n - 1] == END_ID and np.all(row_out[n:] == 0)
            assert int((row_in != 0).sum()) == n  # same mask for input and label
            m = int((row_ctx != 0).sum())
            assert row_ctx[m - 1] == END_ID and np.all(row_ctx[m:] == 0)
        seen += len(context)
    assert seen == len(pairs)


def test_contents_round_trip(setup):
    pairs, src, tgt, dataset = setup
    batches = make_batches(
        dataset.take(8), src, tgt, batch_tokens=4096, max_length=64, shuffle=False
    )
    decoded = set()
    for (context, _), target_out in batches:
        decoded |= set(
            zip(
                [s.decode() for s in src.detokenize(context).numpy()],
                [t.decode() for t in tgt.detokenize(target_out).numpy()],
            )
        )
    assert decoded == set(pairs[:8])


@pytest.mark.parametrize("policy", ["filter", "truncate"])
def test_long_pairs_are_counted_and_handled(setup, policy):
    pairs, src, tgt, dataset = setup
    max_length = 16
    framed = tokenize_pairs(dataset, src, tgt, max_length, policy)
    stats = length_stats(framed, policy)
    expected = sum(
        1
        for a, b in pairs
        if len(src.tokenize([a])[0]) + 1 > max_length
        or len(tgt.tokenize([b])[0]) + 2 > max_length + 1
    )
    assert stats.pairs == len(pairs) and stats.too_long == expected > 0
    assert ("dropped" if policy == "filter" else "truncated") in stats.describe()
    batches = make_batches(
        dataset, src, tgt, batch_tokens=256, max_length=max_length, policy=policy, shuffle=False
    )
    total = 0
    for (context, target_in), _ in batches:
        assert context.shape[1] <= max_length and target_in.shape[1] <= max_length
        total += context.shape[0]
    assert total == (len(pairs) - expected if policy == "filter" else len(pairs))


def test_invalid_arguments(setup):
    _, src, tgt, dataset = setup
    with pytest.raises(ValueError, match="batch_tokens"):
        make_batches(dataset, src, tgt, batch_tokens=10, max_length=64)
    with pytest.raises(ValueError, match="policy"):
        tokenize_pairs(dataset, src, tgt, 32, policy="wrap")


@pytest.mark.parametrize("pad_to_edges", [False, True])
@pytest.mark.parametrize("budget", [64, 300, 1000])
def test_batch_by_tokens_keeps_every_example_within_budget(setup, budget, pad_to_edges):
    from keras_transformer.buckets import bucket_edges
    from keras_transformer.data.pipeline import batch_by_tokens, frame_examples

    _, src, tgt, dataset = setup
    examples = frame_examples(dataset, src, tgt, max_length=64)
    expected = sorted((tuple(s.numpy()), tuple(t.numpy())) for s, t, _ in examples)
    seen, shapes = [], {}
    for (context, target_in), target_out in batch_by_tokens(examples, budget, 64, pad_to_edges):
        assert context.shape[0] * max(context.shape[1], target_in.shape[1]) <= budget
        assert target_in.shape == target_out.shape
        seen += [
            (tuple(s[s != 0]), tuple(t[t != 0])) for s, t in zip(context.numpy(), target_in.numpy())
        ]
        shapes.setdefault(context.shape[1], set()).add((*context.shape, *target_in.shape))
    assert sorted(seen) == expected
    if pad_to_edges:
        # Both sides padded to an edge; full batches and one last batch a bucket.
        assert set(shapes) <= {*bucket_edges(65)[:-1], 64}
        for edge, bucket in shapes.items():
            assert {(s[1], s[3]) for s in bucket} == {(edge, edge)}
            assert len(bucket) <= 2


def test_batch_by_tokens_refuses_a_budget_below_max_length(setup):
    from keras_transformer.data.pipeline import batch_by_tokens, frame_examples

    _, src, tgt, dataset = setup
    with pytest.raises(ValueError, match="batch_tokens"):
        batch_by_tokens(frame_examples(dataset, src, tgt, max_length=64), 32, 64)
