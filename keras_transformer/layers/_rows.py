"""Position-wise layers as one two-dimensional matmul.

A `Dense` layer on `[batch, length, d]` runs on TensorFlow as `tensordot`:
about ten small ops (shape reads, gathers, products, reshapes) around the
matmul. In a decoding loop, which calls every projection once per
generated token on a single position, those ops cost more than the
matmul. Flattening to `[rows, d]` first leaves one reshape on each side,
and none that reads a shape when the inner axes are static (decoding's
one position is).
"""

from keras import ops


def as_rows(inputs):
    """`[..., d]` -> `([rows, d], restore)`.

    Args:
        inputs: a tensor of rank 2 or more with a static last axis.

    Returns:
        The rows, and `restore(y)`, which gives `y [rows, e]` back the
        leading axes of `inputs` (`[..., e]`).
    """
    leading = tuple(inputs.shape[:-1])
    if len(leading) == 1:
        return inputs, lambda y: y
    # A static 0 among them (an empty batch run eagerly) leaves the
    # leading -1 of a reshape undetermined: TensorFlow would make it 1.
    if all(leading[1:]):
        inner = leading[1:]

        def restore(y):
            return ops.reshape(y, (-1, *inner, y.shape[-1]))

    else:
        dims = ops.shape(inputs)[:-1]

        def restore(y):
            return ops.reshape(y, (*dims, y.shape[-1]))

    return ops.reshape(inputs, (-1, inputs.shape[-1])), restore
