import numpy as np
import pytest

from keras_transformer import buckets


def reference_edges(max_length, smallest):
    """The rule written out with floats: ceil(edge * 1.3 / 4) * 4."""
    edges, edge = [], smallest
    while edge < max_length:
        edges.append(edge)
        edge = int(np.ceil(round(edge * 1.3, 9) / 4) * 4)
    return edges + [max_length]


@pytest.mark.parametrize("max_length", [1, 8, 9, 33, 65, 129, 513, 1025])
@pytest.mark.parametrize("smallest", [4, 8, 16])
def test_edges_follow_the_rule_and_end_at_max_length(max_length, smallest):
    edges = buckets.bucket_edges(max_length, smallest)
    assert edges == reference_edges(max_length, smallest)
    assert edges[-1] == max_length
    assert all(a < b for a, b in zip(edges, edges[1:]))
    # Each bucket wastes less than a third of its rows on padding.
    assert all(b <= a * 1.3 + 4 for a, b in zip(edges[:-2], edges[1:-1]))


@pytest.mark.parametrize("length", range(1, 130))
def test_every_length_has_a_bucket_that_holds_it(length):
    edges = buckets.bucket_edges(129)
    bucket = next(edge for edge in edges if length <= edge)
    assert bucket - length < max(8, 0.35 * bucket)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_bad_max_length_is_named(bad):
    with pytest.raises(ValueError, match="max_length"):
        buckets.bucket_edges(bad)


@pytest.mark.parametrize("batch_tokens", [64, 4096, 25000])
def test_batch_sizes_keep_each_batch_within_the_token_budget(batch_tokens):
    edges = buckets.bucket_edges(129)
    sizes = buckets.bucket_batch_sizes(edges, batch_tokens)
    for edge, size in zip(edges, sizes):
        assert size * edge <= batch_tokens or size == 1
        assert (size + 1) * edge > batch_tokens
