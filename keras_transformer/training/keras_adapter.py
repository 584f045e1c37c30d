"""What training needs of Keras beyond its public API, in one place.

Two `tf.distribute` limits of Keras' TensorFlow trainer, and the epoch a
resumed `fit` starts from (read and set). Each reaches one private name,
checked here when it is used: if a Keras release moves it, training fails
at once with a message that names this file, and
tests/training/test_keras_adapter.py fails first. Also one warning of
Keras' that training's own data makes meaningless (`data_ends_epochs`).
"""

import contextlib
import inspect
import warnings

import keras
import tensorflow as tf

_SYMBOLIC_BUILD = "_maybe_symbolic_build"
_INITIAL_EPOCH = "_initial_epoch"
# Keras' warning when a dataset runs out during `fit` or `evaluate`.
_RAN_OUT = "Your input ran out of data"


def _changed(what):
    return RuntimeError(
        f"Keras {keras.__version__} no longer has {what}, which "
        "keras_transformer.training relies on; update "
        "keras_transformer/training/keras_adapter.py for this release"
    )


def check_symbolic_build():
    """Raises unless Keras' trainer has `_maybe_symbolic_build(iterator,
    data_batch)`, the hook `prepare_for_fit` overrides."""
    method = getattr(keras.Model, _SYMBOLIC_BUILD, None)
    if method is None:
        raise _changed(f"`Model.{_SYMBOLIC_BUILD}`")
    if not {"iterator", "data_batch"} <= set(inspect.signature(method).parameters):
        raise _changed(f"`Model.{_SYMBOLIC_BUILD}(iterator, data_batch)`")


def prepare_for_fit(model, strategy=None):
    """Readies a compiled model for `fit` under `strategy`.

    - Builds the optimizer now (public API). Otherwise, without a strategy
      scope, Keras builds it inside the first trace of the train step, and
      the slots created there make TensorFlow trace the step twice (about
      half of `fit`'s start-up).
    - Under a distribution strategy, Keras learns the batch shapes by
      MEAN-reducing the first distributed batch over replicas, which fails
      when token-budget batches split into shards of different sizes (11
      rows over 2 replicas) or differ between workers; the first replica's
      shard has the shapes it needs.
    - Under `MultiWorkerMirroredStrategy`, Keras reduces the logs across
      workers with MEAN over axis 0, which scalars lack: the logs get a
      leading axis of 1, which reduces to the same scalar.

    Args:
        model: a compiled `keras.Model`; its optimizer is built now if
            the model is.
        strategy: the `tf.distribute.Strategy` it was compiled under.

    Returns:
        `model`.
    """
    if model.built and model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    if strategy is None or strategy.num_replicas_in_sync == 1:
        return model  # one replica: nothing is split or reduced
    check_symbolic_build()
    symbolic_build = getattr(model, _SYMBOLIC_BUILD)

    def build_from_first_replica(iterator=None, data_batch=None):
        if iterator is not None and data_batch is None:
            batch = None
            for _, _, batches in iterator:
                batch = next(batches)
                break

            def local(value):
                if isinstance(value, tf.distribute.DistributedValues):
                    return strategy.experimental_local_results(value)[0]
                return value

            data_batch = None if batch is None else tf.nest.map_structure(local, batch)
            iterator = None
        return symbolic_build(iterator=iterator, data_batch=data_batch)

    setattr(model, _SYMBOLIC_BUILD, build_from_first_replica)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        train_step, test_step = model.train_step, model.test_step

        def with_axis(logs):
            return {key: tf.reshape(value, [1]) for key, value in logs.items()}

        model.train_step = lambda data: with_axis(train_step(data))
        model.test_step = lambda data: with_axis(test_step(data))
    return model


def initial_epoch(model):
    """The epoch the running `fit` started from (after a resume, the one
    `BackupAndRestore` restored), 0-based."""
    if not hasattr(model, _INITIAL_EPOCH):
        raise _changed(f"`Model.{_INITIAL_EPOCH}` during fit")
    return getattr(model, _INITIAL_EPOCH) or 0


def set_initial_epoch(model, epoch):
    """Makes the `fit` that is starting (called from `on_train_begin`)
    begin at `epoch`, 0-based, as `BackupAndRestore` does on a resume."""
    if not hasattr(model, _INITIAL_EPOCH):
        raise _changed(f"`Model.{_INITIAL_EPOCH}`, which `fit` starts from")
    setattr(model, _INITIAL_EPOCH, epoch)


@contextlib.contextmanager
def data_ends_epochs():
    """Silences Keras' "Your input ran out of data" while training's own
    datasets are fitted and evaluated.

    Keras' TensorFlow trainer gives that warning whenever a dataset of
    unknown size ends, which is how every validation pass over
    token-budget batches ends, and every training epoch when the data does
    not repeat (their number depends on the shuffle, so it cannot be
    declared). Training repeats its data whenever `steps_per_epoch` is
    set, so there the warning never means what it says. Use it only around
    data built that way: a user's dataset that ends early still warns.

    Example:

    >>> with data_ends_epochs():
    ...     warnings.warn("Your input ran out of data; interrupting training.")
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RAN_OUT, category=UserWarning)
        yield
