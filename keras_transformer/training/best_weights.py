"""Keeping the weights of a run's best epoch, across restarts."""

import json
import math
import os
import warnings

import keras

from keras_transformer.training.atomic_files import (
    WEIGHTS_SUFFIX,
    check_weights_path,
    save_weights_atomically,
    write_json_atomically,
)


class BestWeights(keras.callbacks.Callback):
    """Saves the weights whenever an epoch ends with the lowest `monitor` yet.

    `keras.callbacks.ModelCheckpoint(save_best_only=True)` for a loss, with
    two differences a resumable run needs. The file is written under a
    temporary name and renamed, so a kill mid-save leaves the previous best
    whole. And the best value is kept beside the weights (`best.json` for
    `best.weights.h5`), so a run resumed in a new process only replaces
    them with an epoch better than any before the restart, not with
    its first epoch.

    Args:
        path: the weights file, ending in `.weights.h5`.
        monitor: the logged value to minimize (`"val_loss"`, `"loss"`).

    Example:

    >>> best = BestWeights("runs/demo/best.weights.h5")
    >>> # model.fit(batches, validation_data=valid, epochs=10, callbacks=[best])
    >>> # best.best: the lowest val_loss seen, in this run or before a resume
    """

    def __init__(self, path, monitor="val_loss"):
        super().__init__()
        check_weights_path(path)
        self.path = os.path.abspath(path)
        self.record_path = self.path[: -len(WEIGHTS_SUFFIX)] + ".json"
        self.monitor = monitor
        self.best = math.inf
        self.best_epoch = None
        self._warned = False

    def on_train_begin(self, logs=None):
        self.best, self.best_epoch = math.inf, None
        record = self._read_record()
        if record is not None and os.path.exists(self.path):
            self.best, self.best_epoch = record["value"], record["epoch"]

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            if not self._warned:
                warnings.warn(
                    f"BestWeights monitors {self.monitor!r}, which the logs lack "
                    f"(they have {sorted(logs or {})}); nothing is saved",
                    stacklevel=2,
                )
                self._warned = True
            return
        value = float(value)
        if math.isnan(value) or value >= self.best:
            return
        save_weights_atomically(self.model, self.path)
        self.best, self.best_epoch = value, epoch + 1
        write_json_atomically(
            self.record_path, {"monitor": self.monitor, "value": value, "epoch": epoch + 1}
        )

    def _read_record(self):
        """The saved best, or None when there is none for this `monitor`."""
        try:
            with open(self.record_path, encoding="utf-8") as f:
                record = json.load(f)
            if record.get("monitor") != self.monitor:
                return None
            return {"value": float(record["value"]), "epoch": int(record["epoch"])}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            # Written atomically, so only an edit breaks it; the weights
            # file is then replaced at the next epoch's end, as if fresh.
            return None
