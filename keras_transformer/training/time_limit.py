"""Stopping a training run at a wall-clock budget."""

import time

import keras

from keras_transformer._validation import check_positive_number


class TimeLimit(keras.callbacks.Callback):
    """Stops `fit` at the first step boundary past a wall-clock budget.

    The epoch in progress ends early but normally: validation runs, the
    best-weights checkpoint and the history see it, and the caller saves
    the final weights as after any run. The budget counts from the start
    of `fit` in this process; the learning-rate schedule, being a function
    of the step, is unaffected. Useful to fit a run to a fixed budget on
    machines of unknown speed (as fairseq's `--stop-time-hours`).

    Each process decides on its own clock, so this suits one process
    (one device or `MirroredStrategy`), not multi-worker training, where
    workers stopping at different steps would wait on each other forever.

    Args:
        minutes: the budget, a positive number of minutes.
        clock: a function returning seconds (for tests).

    Example:

    >>> limit = TimeLimit(minutes=55)
    >>> # model.fit(batches, epochs=100, callbacks=[limit])
    >>> # limit.stopped_at_step: the optimizer step it stopped at, or None
    """

    def __init__(self, minutes, clock=time.monotonic):
        super().__init__()
        check_positive_number("minutes", minutes)
        self.minutes = minutes
        self.clock = clock
        self.stopped_at_step = None
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = self.clock()
        self.stopped_at_step = None

    def on_train_batch_end(self, batch, logs=None):
        if self.stopped_at_step is None and self.clock() - self._start >= self.minutes * 60:
            self.stopped_at_step = int(self.model.optimizer.iterations.numpy())
            self.model.stop_training = True
            print(
                f"\nTime limit of {self.minutes:g} min reached at optimizer step "
                f"{self.stopped_at_step}; finishing the epoch here.",
                flush=True,
            )
