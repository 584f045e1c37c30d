"""The callbacks of a training run."""

import os

import keras

from keras_transformer.training import keras_adapter
from keras_transformer.training.backup import Backup
from keras_transformer.training.best_weights import BestWeights
from keras_transformer.training.epoch_weights import EpochWeights
from keras_transformer.training.time_limit import TimeLimit


class _StatusLine(keras.callbacks.Callback):
    """Prints where a run starts (fresh or resumed) for people and logs."""

    def on_train_begin(self, logs=None):
        epoch = keras_adapter.initial_epoch(self.model)
        step = int(self.model.optimizer.iterations.numpy())
        if step:
            print(
                f"Resuming from the last checkpoint: epoch {epoch + 1}, optimizer step {step}",
                flush=True,
            )


def make_callbacks(run, config, has_validation, is_chief=True, worker_index=0):
    """TensorBoard, best-weights checkpoint, backup, NaN guard, CSV,
    and, when the config sets them, the time limit and the epoch weights
    kept for averaging.

    Args:
        run: the `RunDirectory`.
        config: the `TrainConfig`.
        has_validation: whether `fit` gets validation data.
        is_chief: only the chief writes logs and checkpoints.
        worker_index: backups are kept per worker.

    Returns:
        A list of `keras.callbacks.Callback`, one of them the `Backup`,
        which the caller removes once the final weights are saved.
    """
    backup_dir = run.backup if is_chief else os.path.join(run.backup, f"worker_{worker_index}")
    callbacks = [
        # Saves weights, optimizer state and the epoch every
        # `checkpoint_every` steps and at each epoch's end: a killed run
        # restarted with the same command continues from there.
        Backup(backup_dir, save_freq=config.checkpoint_every),
        keras.callbacks.TerminateOnNaN(),
        _StatusLine(),
    ]
    if config.time_limit_minutes is not None:
        callbacks.append(TimeLimit(config.time_limit_minutes))
    if is_chief:
        callbacks += [
            keras.callbacks.TensorBoard(run.logs, update_freq="epoch"),
            keras.callbacks.CSVLogger(run.history, append=True),
            BestWeights(run.best_weights, monitor="val_loss" if has_validation else "loss"),
        ]
        if config.average_last:
            callbacks.append(EpochWeights(run.epoch_weights, keep=config.average_last))
    return callbacks
