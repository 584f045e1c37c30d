"""The one rule of compiled shapes: they go with `jit_compile` alone.

TensorFlow-free, so that `export`'s options check it before TensorFlow
loads; `Translator` checks it as it is built.
"""


def check_compiled_shapes(jit_compile, batch_sizes, lengths, split_batches=True):
    """Refuses compiled shapes without `jit_compile`.

    Raises:
        ValueError: `batch_sizes`, `lengths` or `split_batches=False` are
            given while `jit_compile` is off (they would be ignored).

    Example:

    >>> check_compiled_shapes(True, [1, 8], [16])
    >>> check_compiled_shapes(False, None, [16])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `batch_sizes`, `lengths` and `split_batches` ... of `jit_compile=True` ...
    """
    if not jit_compile and (batch_sizes or lengths or not split_batches):
        raise ValueError(
            "`batch_sizes`, `lengths` and `split_batches` (--batch-sizes, --lengths, "
            "--no-split-batches) are the shapes of `jit_compile=True` (--jit-compile) only"
        )
