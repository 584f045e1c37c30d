"""Writing weights files that a kill cannot leave half-written."""

import os


def save_weights_atomically(model, path):
    """Saves `model`'s weights to `path` so that the file is whole or absent.

    Keras writes a `.weights.h5` file in place: a process killed during the
    write leaves a truncated file that no longer loads. This writes a
    `partial.`-prefixed file beside `path` and renames it over `path`
    once complete (a rename within one directory is atomic), so `path`
    holds either the old weights or the new ones.

    Args:
        model: a built `keras.Model` (or layer with weights).
        path: where the weights go; it must end in `.weights.h5`.

    Returns:
        `path`.

    Example:

    >>> import keras, os, tempfile
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> path = os.path.join(tempfile.mkdtemp(), "final.weights.h5")
    >>> save_weights_atomically(model, path) == path
    True
    """
    if not str(path).endswith(".weights.h5"):
        raise ValueError(f"A weights file's name must end in `.weights.h5`. Received: {path!r}")
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    partial = os.path.join(directory, f"partial.{name}")
    model.save_weights(partial, overwrite=True)
    os.replace(partial, path)
    return path
