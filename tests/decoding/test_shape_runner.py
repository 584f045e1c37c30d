"""`ShapeRunner`: the rows and lengths the compiled programs see, and the
results of the real rows, against running each row on its own."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import ShapeRunner


def _recording(seen):
    """A function for `runner.run` that records each call's first row and
    batch size, and returns each row's sum and first value (a row's own
    result, wherever it runs)."""

    def fn(first, values):
        seen.append((int(first), int(values.shape[0])))
        return tf.reduce_sum(values, axis=1), values[:, 0]

    return fn


@pytest.mark.parametrize("split_batches", [True, False])
@pytest.mark.parametrize("rows", [0, 1, 2, 3, 7, 9])
@pytest.mark.parametrize("batch_sizes", [(1, 4), (2,), (3, 8)])
def test_every_row_gets_its_own_result_once(rows, batch_sizes, split_batches):
    runner = ShapeRunner(batch_sizes, lengths=(4,), longest=8, split_batches=split_batches)
    values = tf.constant(np.arange(rows * 3).reshape(rows, 3), tf.int32)
    seen = []
    total, firsts = runner.run(_recording(seen), [values], [([], tf.int32), ([], tf.int32)])
    np.testing.assert_array_equal(total, np.arange(rows * 3).reshape(rows, 3).sum(axis=1))
    np.testing.assert_array_equal(firsts, np.arange(rows) * 3)
    # Eagerly, each part is one call: every program batch size is one the
    # runner lists, and the parts start where the previous ones ended.
    assert all(size in runner.program_batch_sizes for _, size in seen)
    if rows == 0:
        assert seen == []


@pytest.mark.parametrize(
    "batch_sizes, split_batches, rows, calls",
    [
        ((4,), True, 4, [(0, 2), (2, 2)]),
        ((4,), False, 4, [(0, 4)]),
        ((4,), True, 5, [(0, 2), (2, 2), (4, 2)]),
        ((1, 8), True, 3, [(0, 4), (2, 1)]),
        ((1, 8), False, 3, [(0, 8)]),
        ((3,), True, 5, [(0, 2), (2, 2), (3, 2), (4, 2)]),
    ],
    ids=["halves of a chunk", "one program a chunk", "a last chunk of one row, padded",
         "halves rounded up, padded", "padded to the next size", "odd halves"],
)  # fmt: skip
def test_chunks_halves_and_padding(batch_sizes, split_batches, rows, calls):
    # (first row, program batch size) of each call.
    runner = ShapeRunner(batch_sizes, lengths=(4,), longest=8, split_batches=split_batches)
    seen = []
    values = tf.ones([rows, 2], tf.int32)
    runner.run(_recording(seen), [values], [([], tf.int32), ([], tf.int32)])
    assert seen == calls


@pytest.mark.parametrize(
    "batch_sizes, split_batches, programs",
    [((1, 8, 32), True, [1, 4, 16]), ((1, 8, 32), False, [1, 8, 32]), ((3, 1), True, [1, 2])],
)
def test_program_batch_sizes(batch_sizes, split_batches, programs):
    runner = ShapeRunner(batch_sizes, lengths=(8, 16), longest=16, split_batches=split_batches)
    assert runner.program_batch_sizes == programs
    assert runner.shapes == [(b, n) for b in programs for n in (8, 16)]


@pytest.mark.parametrize("length, bucket", [(1, 16), (16, 16), (17, 24), (40, 40), (99, 40)])
def test_lengths_pad_to_the_smallest_that_holds_them(length, bucket):
    runner = ShapeRunner(longest=40)
    assert runner.lengths == [16, 24, 32, 40]
    assert int(runner.bucket(length)) == bucket
    ids = tf.ones([2, min(length, 40)], tf.int32)
    padded = runner.pad_length(ids, tf.shape(ids)[1])
    assert padded.shape == (2, bucket)
    np.testing.assert_array_equal(padded[:, : ids.shape[1]], ids)
    np.testing.assert_array_equal(padded[:, ids.shape[1] :], 0)


@pytest.mark.parametrize("name, kwargs", [("batch_sizes", dict(batch_sizes=(0, 4))),
                                          ("lengths", dict(lengths=(-1,)))])  # fmt: skip
def test_bad_shapes_are_refused(name, kwargs):
    with pytest.raises(ValueError, match=name):
        ShapeRunner(**kwargs)
