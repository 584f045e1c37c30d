"""Checkpoint averaging: the mean of the weights of the last epochs."""

import os

import numpy as np

from keras_transformer._validation import check_positive_int
from keras_transformer.training.atomic_files import save_weights_atomically
from keras_transformer.training.epoch_weights import epoch_weight_files
from keras_transformer.training.run_directory import (
    RunDirectory,
    build_run_model,
    load_weights_file,
)


def average_weights(model, paths):
    """Sets `model`'s weights to the element-wise mean of saved weight files.

    Averaging the weights of the last checkpoints of one run (Vaswani et
    al., 2017, section 6.1; fairseq's and OpenNMT's `average_checkpoints`)
    smooths out the noise of the last updates and usually gains a fraction
    of a BLEU point over the last or the best checkpoint. The sum is kept
    in float64 so that averaging many files loses no precision; weights
    that are not floating point are taken from the last file.

    Args:
        model: a built model whose architecture matches the files.
        paths: `.weights.h5` files written by `model.save_weights`.

    Returns:
        `model`, now holding the averaged weights.

    Example:

    >>> # model = load_run("runs/demo")[0]
    >>> # average_weights(model, ["e9.weights.h5", "e10.weights.h5"])
    """
    paths = list(paths)
    if not paths:
        raise ValueError("No weight files to average")
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Weight file not found: {path}")
    totals = None
    for path in paths:
        load_weights_file(model, path)
        values = model.get_weights()
        if totals is None:
            totals = [np.array(v, dtype=np.float64) for v in values]
        else:
            for total, value in zip(totals, values):
                total += value
    # `values` now holds the last file's weights.
    averaged = [
        (total / len(paths)).astype(value.dtype)
        if np.issubdtype(value.dtype, np.floating)
        else value
        for total, value in zip(totals, values)
    ]
    model.set_weights(averaged)
    return model


def average_checkpoints(run_path, last=5):
    """Averages a run's last epoch weights into `averaged.weights.h5`.

    Reads the files that training keeps when its `average_last` key is
    set (`runs/NAME/epochs/`). After this, `load_run` (and so `evaluate`
    and `export`) uses the averaged weights.

    Args:
        run_path: the run directory.
        last: how many of the newest epochs to average; fewer are used,
            with a message, when fewer were kept.

    Returns:
        `(model, epochs)`: the model holding the averaged weights and the
        epoch numbers (from 1) that went into them.

    Example:

    >>> # model, epochs = average_checkpoints("runs/demo", last=5)
    """
    check_positive_int("last", last)
    run = RunDirectory(run_path)
    found = epoch_weight_files(run.epoch_weights)
    if not found:
        raise FileNotFoundError(
            f"No epoch weights in {run.epoch_weights}: train with `average_last` "
            "(--average-last N) to keep them"
        )
    chosen = found[-last:]
    if len(chosen) < last:
        print(
            f"Averaging the {len(chosen)} epochs kept in {run.epoch_weights} (asked for {last})",
            flush=True,
        )
    model = build_run_model(run)
    average_weights(model, [path for _, path in chosen])
    epochs = [epoch for epoch, _ in chosen]
    save_weights_atomically(model, run.averaged_weights)
    run.write_json(run.averaged_info, {"epochs": epochs})
    return model, epochs
