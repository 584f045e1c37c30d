"""Writing run files that a kill cannot leave half-written.

Each writer writes a `partial.`-prefixed file beside its target and
renames it over the target once complete (a rename within one directory
is atomic), so the target holds either the old content or the new.
"""

import json
import os

WEIGHTS_SUFFIX = ".weights.h5"


def check_weights_path(path):
    """Raises `ValueError` unless `path` names a file `load_weights` reads."""
    if not str(path).endswith(WEIGHTS_SUFFIX):
        raise ValueError(
            f"A weights file's name must end in `{WEIGHTS_SUFFIX}`. Received: {path!r}"
        )


def _partial(path):
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"partial.{name}")


def save_weights_atomically(model, path):
    """Saves `model`'s weights to `path` so that the file is whole or absent.

    Keras writes a `.weights.h5` file in place: a process killed during the
    write leaves a truncated file that no longer loads.

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
    check_weights_path(path)
    partial = _partial(path)
    model.save_weights(partial, overwrite=True)
    os.replace(partial, path)
    return path


def write_json_atomically(path, values):
    """Writes `values` as JSON (indented, keys sorted) to `path`, whole or
    not at all.

    Returns:
        `path`.

    Example:

    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "best.json")
    >>> json.load(open(write_json_atomically(path, {"epoch": 3})))
    {'epoch': 3}
    """
    partial = _partial(path)
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2, sort_keys=True)
    os.replace(partial, path)
    return path
