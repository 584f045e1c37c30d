"""The private Keras names training relies on, and what it does with them."""

import inspect
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import Transformer
from keras_transformer.training import keras_adapter
from keras_transformer.training.recipe import compile_for_training


def _model():
    return Transformer(1, 16, 2, 32, source_vocab_size=30, target_vocab_size=30)


def _data(batch=8):
    rng = np.random.default_rng(0)
    src = rng.integers(1, 30, (batch, 5))
    tgt = rng.integers(1, 30, (batch, 4))
    return (src, tgt), tgt


def test_keras_still_has_the_symbolic_build_hook():
    # Fails loudly when a Keras release renames the hook or its arguments.
    keras_adapter.check_symbolic_build()
    parameters = inspect.signature(keras.Model._maybe_symbolic_build).parameters
    assert {"iterator", "data_batch"} <= set(parameters)


def test_a_missing_hook_is_named(monkeypatch):
    for cls in keras.Model.__mro__:
        if "_maybe_symbolic_build" in vars(cls):
            monkeypatch.delattr(cls, "_maybe_symbolic_build")
    with pytest.raises(RuntimeError, match="keras_adapter.py"):
        keras_adapter.check_symbolic_build()


@pytest.mark.parametrize("built", [True, False])
def test_fit_traces_the_train_step_once(built):
    model = _model()
    if built:
        model.build(((None, None), (None, None)))
    compile_for_training(model, warmup_steps=10)
    assert model.optimizer.built == built
    traces = []
    train_step = model.train_step

    def counted(data):
        traces.append(1)
        return train_step(data)

    model.train_step = counted
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    # Unbuilt, the weights and the optimizer's slots are created in the
    # first trace, and TensorFlow traces the step again, as for any model.
    assert len(traces) == (1 if built else 2)
    assert model.optimizer.iterations.numpy() == 4


class _Record(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.epoch = keras_adapter.initial_epoch(self.model)


def test_initial_epoch_is_the_restored_epoch(tmp_path):
    model = _model()
    model.build(((None, None), (None, None)))
    compile_for_training(model, warmup_steps=10)
    x, y = _data()
    backup = keras.callbacks.BackupAndRestore(str(tmp_path), delete_checkpoint=False)
    first, resumed = _Record(), _Record()
    model.fit(x, y, epochs=2, verbose=0, callbacks=[backup, first])
    # BackupAndRestore restores in on_train_begin, before later callbacks.
    model.fit(x, y, epochs=4, verbose=0, callbacks=[backup, resumed])
    assert (first.epoch, resumed.epoch) == (0, 2)


class _StartAt(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.start = epoch

    def on_train_begin(self, logs=None):
        keras_adapter.set_initial_epoch(self.model, self.start)


@pytest.mark.parametrize("start", [0, 1, 3])
def test_set_initial_epoch_is_where_fit_starts(start):
    model = _model()
    model.build(((None, None), (None, None)))
    compile_for_training(model, warmup_steps=10)
    x, y = _data()
    seen = []
    record = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: seen.append(epoch))
    model.fit(x, y, batch_size=4, epochs=4, verbose=0, callbacks=[_StartAt(start), record])
    assert seen == list(range(start, 4))
    assert model.optimizer.iterations.numpy() == 2 * (4 - start)


@pytest.mark.parametrize("function", ["initial_epoch", "set_initial_epoch"])
def test_initial_epoch_names_a_missing_attribute(function):
    args = (object(),) if function == "initial_epoch" else (object(), 1)
    with pytest.raises(RuntimeError, match="_initial_epoch"):
        getattr(keras_adapter, function)(*args)


def _unknown_size_batches():
    """Batches whose number Keras cannot know, as token-budget batches."""
    (src, tgt), labels = _data(16)
    dataset = tf.data.Dataset.from_tensor_slices(((src, tgt), labels)).batch(4)
    return dataset.filter(lambda inputs, labels: True)


def _ran_out_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if "ran out of data" in str(w.message)]


@pytest.mark.parametrize("repeat", [False, True])
def test_data_ends_epochs_silences_only_the_end_of_data_warning(repeat):
    model = _model()
    compile_for_training(model, warmup_steps=10)
    data = _unknown_size_batches()
    train = data.repeat() if repeat else data

    def fit():
        model.fit(
            train, validation_data=data, epochs=2, steps_per_epoch=3 if repeat else None, verbose=0
        )

    # Keras warns at the end of a dataset of unknown size; if a release
    # stops doing so, the adapter can go.
    assert _ran_out_warnings(fit)

    def quiet_fit():
        with keras_adapter.data_ends_epochs():
            fit()
            warnings.warn("another warning", UserWarning, stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_fit()
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "ran out of data" in m]
    assert "another warning" in messages
