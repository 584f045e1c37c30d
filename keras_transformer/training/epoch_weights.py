"""Keeping the weights of the last few epochs, for checkpoint averaging."""

import glob
import os
import re

import keras

from keras_transformer._validation import check_positive_int
from keras_transformer.training.atomic_files import save_weights_atomically

_PATTERN = re.compile(r"epoch_(\d+)\.weights\.h5$")


def epoch_weight_files(directory):
    """The `epoch_NNNN.weights.h5` files of a directory, oldest first.

    Args:
        directory: where `EpochWeights` writes.

    Returns:
        A list of `(epoch, path)`, epochs counted from 1, sorted by epoch.
    """
    found = []
    for path in glob.glob(os.path.join(glob.escape(directory), "epoch_*.weights.h5")):
        match = _PATTERN.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


class EpochWeights(keras.callbacks.Callback):
    """Saves the model's weights at the end of each epoch, keeping the last `keep`.

    The files are what checkpoint averaging reads (the paper averages the
    last 5 checkpoints of its base models); see
    `keras_transformer.training.average_checkpoints`. Each file is written
    under a temporary name and renamed, so a kill mid-save never leaves a
    truncated file behind, and a resumed run (after a `Backup` restore)
    overwrites the epochs it repeats.

    Args:
        directory: where the files go (`epoch_0001.weights.h5`, ...).
        keep: how many of the newest files to keep; a positive int.

    Example:

    >>> keeper = EpochWeights("runs/demo/epochs", keep=5)
    >>> # model.fit(batches, epochs=20, callbacks=[keeper])
    >>> # then average_weights(model, [p for _, p in epoch_weight_files(...)])
    """

    def __init__(self, directory, keep):
        super().__init__()
        check_positive_int("keep", keep)
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"epoch_{epoch + 1:04d}.weights.h5")
        save_weights_atomically(self.model, path)
        for _, old in epoch_weight_files(self.directory)[: -self.keep]:
            os.remove(old)
