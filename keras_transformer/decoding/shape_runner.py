"""Runs id-level work compiled with XLA in few, known shapes."""

import tensorflow as tf

from keras_transformer._validation import check_positive_int
from keras_transformer.decoding import _common

DEFAULT_BATCH_SIZES = (1, 8, 32)
# About 1.5x apart: a source pads to at most 1.5x its tokens (the encoder's
# work grows with it) for few programs (nine up to 256 tokens).
DEFAULT_LENGTHS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def _sizes(name, values):
    """Sorted distinct positive ints, or a clear error."""
    values = sorted({_common.as_int(v) for v in values})
    for value in values:
        check_positive_int(name, value)
    return values


class ShapeRunner:
    """Cuts and pads inputs to the shapes of compiled programs.

    XLA compiles a program per input shape. The runner makes the shapes
    few and known, as TF Serving's batching does with
    `allowed_batch_sizes`: rows run in chunks of at most the largest of
    `batch_sizes`, each padded (with copies of its last row, which end when
    it ends) to the smallest program batch size that holds it; token
    sequences are padded with 0 to the smallest of `lengths` that holds
    them. Outputs are cut back to the real rows.

    With `split_batches`, a chunk of two rows or more runs as two programs
    at once, one per half (the first rounded up), so the programs are
    compiled for half of each batch size. A compiled program runs most of
    its small kernels on one thread; TensorFlow's executor runs the two
    halves on two inter-op threads. In TF Serving's session on two cores
    that answered a batch of 32 10-12% sooner than one program, one
    request or two at once; with one inter-op thread one program a chunk
    (`split_batches=False`) was 8-10% sooner.

    Args:
        batch_sizes: the batch sizes requests are cut and padded to.
        lengths: the token lengths of the programs; `longest` is added.
        longest: the longest input a program must hold.
        split_batches: run a chunk of two rows or more as two programs.

    Example:

    >>> runner = ShapeRunner(batch_sizes=(1, 4), lengths=(8,), longest=16)
    >>> runner.program_batch_sizes, runner.lengths
    ([1, 2], [8, 16])
    >>> ids = tf.constant([[5, 6, 7]] * 3)
    >>> padded = runner.pad_length(ids, tf.shape(ids)[1])
    >>> (total,) = runner.run(
    ...     lambda first, rows: tf.reduce_sum(rows, axis=1), [padded], [([], tf.int32)]
    ... )
    >>> total.numpy().tolist(), tuple(padded.shape)
    ([18, 18, 18], (3, 8))
    """

    def __init__(self, batch_sizes=None, lengths=None, longest=None, split_batches=True):
        self.batch_sizes = _sizes("batch_sizes", batch_sizes or DEFAULT_BATCH_SIZES)
        if longest is None:
            lengths = _sizes("lengths", lengths or DEFAULT_LENGTHS)
        else:
            lengths = lengths or [n for n in DEFAULT_LENGTHS if n < longest]
            lengths = _sizes("lengths", [n for n in lengths if n < longest] + [longest])
        self.lengths = lengths
        self.split_batches = bool(split_batches)

    @property
    def program_batch_sizes(self):
        """The batch sizes the programs are compiled for: half of each of
        `batch_sizes`, rounded up (1 stays 1), when batches are split; else
        `batch_sizes`."""
        if not self.split_batches:
            return list(self.batch_sizes)
        return sorted({(b + 1) // 2 for b in self.batch_sizes})

    @property
    def shapes(self):
        """The input shapes `(batch, length)` of the programs."""
        return [(b, n) for b in self.program_batch_sizes for n in self.lengths]

    def bucket(self, length):
        """The smallest of `lengths` that holds `length` tokens (the longest
        when none does)."""
        lengths = tf.constant(self.lengths)
        return lengths[tf.minimum(tf.searchsorted(lengths, [length])[0], len(self.lengths) - 1)]

    def pad_length(self, ids, length):
        """`ids [batch, n]` padded with 0 to the bucket of `length`."""
        return tf.pad(ids, [[0, 0], [0, self.bucket(length) - tf.shape(ids)[1]]])

    def run(self, fn, tensors, outputs):
        """`fn(first_row, *tensors)` over the rows of `tensors` (each
        `[rows, ...]`) in the programs' batch sizes.

        Args:
            fn: called with the index of the first real row of its part
                (e.g. to draw apart) and each tensor's rows, padded to a
                program batch size; returns a tensor or a tuple.
            tensors: tensors of the same number of rows.
            outputs: each output's inner shape and dtype, `[(shape,
                dtype)]`.

        Returns:
            The outputs of the real rows, concatenated in order.
        """
        rows = tf.shape(tensors[0])[0]
        largest = self.batch_sizes[-1]
        sizes = tf.constant(self.program_batch_sizes)
        chunks = (rows + largest - 1) // largest
        # An empty first element: a request of no rows concatenates to empty
        # outputs, and runs nothing.
        arrays = tuple(
            tf.TensorArray(
                dtype, size=chunks + 1, element_shape=[None, *shape], infer_shape=False
            ).write(0, tf.zeros([0, *shape], dtype))
            for shape, dtype in outputs
        )

        def part(first, count):
            size = sizes[tf.searchsorted(sizes, [count])[0]]
            # Padding rows copy the part's last row: they end when it does,
            # and a search runs no step for them alone.
            index = first + tf.minimum(tf.range(size), count - 1)
            results = fn(first, *[tf.gather(t, index) for t in tensors])
            results = results if isinstance(results, (tuple, list)) else (results,)
            return tuple(r[:count] for r in results)

        def body(i, arrays):
            begin = i * largest
            real = tf.minimum(largest, rows - begin)
            if self.split_batches:
                half = (real + 1) // 2

                def halves():
                    # Neither half waits for the other: the executor runs
                    # them on two inter-op threads.
                    first, second = part(begin, half), part(begin + half, real - half)
                    return tuple(tf.concat([a, b], axis=0) for a, b in zip(first, second))

                results = tf.cond(real > 1, halves, lambda: part(begin, real))
            else:
                results = part(begin, real)
            return i + 1, tuple(a.write(i + 1, r) for a, r in zip(arrays, results))

        _, arrays = tf.while_loop(lambda i, _: i < chunks, body, (0, arrays))
        results = tuple(a.concat() for a in arrays)
        for result, (shape, _) in zip(results, outputs):
            result.set_shape([None, *shape])
        return results
