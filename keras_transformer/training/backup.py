"""Backups of a training run that a kill at any instant leaves loadable."""

import json
import os
import re
import shutil

import keras

from keras_transformer._validation import check_positive_int
from keras_transformer.training import keras_adapter
from keras_transformer.training.atomic_files import (
    WEIGHTS_SUFFIX,
    save_weights_atomically,
    write_json_atomically,
)

METADATA = "training_metadata.json"
_WEIGHTS = re.compile(r"^backup_(\d+)\.weights\.h5$")
# The layout of `keras.callbacks.BackupAndRestore`, still read so that a
# run backed up by it resumes.
_KERAS_LATEST = "latest.weights.h5"
_KERAS_PREVIOUS = "latest.weights.h5.bkp"


class Backup(keras.callbacks.Callback):
    """Backs up a run every `save_freq` steps and restores it when `fit` starts.

    What `keras.callbacks.BackupAndRestore` keeps (the weights, the
    optimizer's state and the epoch; `fit` started again continues from
    that epoch), but committed so that a process killed at any instant,
    mid-save included, leaves the last whole backup in place. Each save
    writes the weights to a new file, then commits it by renaming a
    complete `training_metadata.json` that names it over the old one, and
    only then removes the older weights. Resuming reads the metadata and
    loads the file it names: never a partly written one. A backup written
    by `BackupAndRestore` resumes too.

    The backup outlives `fit`: the caller removes it (`remove()`) once the
    run's final weights are safely written, so a kill between the two still
    resumes rather than starts over.

    Args:
        backup_dir: the directory the backup lives in (one per process
            that trains; created on the first save).
        save_freq: steps between saves, a positive int; a save also
            closes every epoch.

    Example:

    >>> import tempfile
    >>> backup = Backup(tempfile.mkdtemp(), save_freq=100)
    >>> # model.fit(batches, epochs=10, callbacks=[backup])
    >>> # then save the final weights, and backup.remove()
    """

    def __init__(self, backup_dir, save_freq):
        super().__init__()
        check_positive_int("save_freq", save_freq)
        self.backup_dir = os.path.abspath(backup_dir)
        self.save_freq = save_freq
        self.metadata_path = os.path.join(self.backup_dir, METADATA)
        self.restored = None
        self._epoch = 0
        self._steps_since_save = 0
        self._last_batch = -1
        self._saved = None

    def on_train_begin(self, logs=None):
        self.restored = self._restore()
        self._epoch = keras_adapter.initial_epoch(self.model)
        self._steps_since_save = 0
        self._last_batch = -1
        self._saved = None

    def on_train_batch_end(self, batch, logs=None):
        # With `steps_per_execution` > 1, Keras reports every k-th batch.
        self._steps_since_save += batch - self._last_batch
        self._last_batch = batch
        if self._steps_since_save >= self.save_freq:
            self.save(self._epoch, batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        self._epoch = epoch + 1
        if self._steps_since_save == 0 and self._saved is not None:
            self._commit(self._saved, self._epoch, 0)  # no step since: same weights
        else:
            self.save(self._epoch, 0)
        self._last_batch = -1

    def save(self, epoch, batch):
        """Writes and commits a backup of the model as it is now.

        Args:
            epoch: the epoch `fit` resumes from, 0-based.
            batch: how many of that epoch's batches it has done (kept for
                people reading the backup; `fit` restarts the epoch).
        """
        sequence = 1 + max([_sequence(name) for name in self._weights_files()], default=0)
        name = f"backup_{sequence:09d}.weights.h5"
        save_weights_atomically(self.model, os.path.join(self.backup_dir, name))
        self._commit(name, epoch, batch)

    def _commit(self, name, epoch, batch):
        self._steps_since_save = 0
        # The commit:
        write_json_atomically(self.metadata_path, {"epoch": epoch, "batch": batch, "weights": name})
        self._saved = name
        stale = [
            other
            for other in os.listdir(self.backup_dir)
            if (_WEIGHTS.match(other) and other != name) or other.startswith("partial.")
        ]
        for other in [*stale, _KERAS_LATEST, _KERAS_PREVIOUS, f"{METADATA}.bkp"]:
            _remove(os.path.join(self.backup_dir, other))

    def remove(self):
        """Deletes the backup; call it once the run's results are saved."""
        shutil.rmtree(self.backup_dir, ignore_errors=True)

    def _weights_files(self):
        if not os.path.isdir(self.backup_dir):
            return []
        return sorted(name for name in os.listdir(self.backup_dir) if _WEIGHTS.match(name))

    def _read_metadata(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                metadata = json.load(f)
            if not isinstance(metadata.get("epoch"), int) or metadata["epoch"] < 0:
                raise ValueError("its `epoch` is not an int >= 0")
            if "weights" in metadata and not _WEIGHTS.match(str(metadata["weights"])):
                raise ValueError(f"its `weights` is {metadata['weights']!r}")
            return metadata
        except (OSError, ValueError, AttributeError) as error:
            raise ValueError(
                f"The training backup {path} cannot be read ({error}); "
                f"delete {self.backup_dir} to start the run over"
            ) from None

    def _restore(self):
        """Loads the committed backup, if any; returns its metadata."""
        if not os.path.exists(self.metadata_path):
            if os.path.exists(os.path.join(self.backup_dir, _KERAS_LATEST)):
                return self._restore_keras_layout()
            return None  # a fresh run
        metadata = self._read_metadata(self.metadata_path)
        if "weights" not in metadata:
            return self._restore_keras_layout()
        self._load(os.path.join(self.backup_dir, metadata["weights"]))
        keras_adapter.set_initial_epoch(self.model, metadata["epoch"])
        return metadata

    def _restore_keras_layout(self):
        """`BackupAndRestore` writes in place, keeping the previous save as
        `.bkp`; a kill mid-save leaves the latest truncated."""
        pairs = [
            (_KERAS_LATEST, METADATA),
            (_KERAS_PREVIOUS, f"{METADATA}.bkp"),
        ]
        errors = []
        for weights, metadata in pairs:
            weights_path = os.path.join(self.backup_dir, weights)
            metadata_path = os.path.join(self.backup_dir, metadata)
            if not os.path.exists(weights_path):
                continue
            try:
                self._load(weights_path)
                epoch = 0
                if os.path.exists(metadata_path):
                    epoch = self._read_metadata(metadata_path)["epoch"]
            except ValueError as error:
                errors.append(str(error))
                continue
            keras_adapter.set_initial_epoch(self.model, epoch)
            return {"epoch": epoch, "weights": weights}
        raise ValueError(" and ".join(errors))

    def _load(self, path):
        if not self.model.built:
            raise ValueError(
                "Backup restores into a built model: build it (call it on a batch) before `fit`"
            )
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)  # so its state loads too
        try:
            if path.endswith(WEIGHTS_SUFFIX):
                self.model.load_weights(path)
            else:  # `BackupAndRestore`'s `.bkp`: `load_weights` reads only `.weights.h5`
                copy = os.path.join(self.backup_dir, f"partial.restore{WEIGHTS_SUFFIX}")
                shutil.copyfile(path, copy)
                try:
                    self.model.load_weights(copy)
                finally:
                    _remove(copy)
        except Exception as error:  # h5py raises OSError, RuntimeError, KeyError...
            raise ValueError(
                f"The training backup {path} does not load into this model "
                f"({type(error).__name__}: {error}); delete {self.backup_dir} "
                "to start the run over"
            ) from None


def _sequence(name):
    return int(_WEIGHTS.match(name).group(1))


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


__all__ = ["Backup", "METADATA"]
