import random

import keras_tuner
import numpy as np
import pytest

from keras_transformer.tuning import TransformerHyperModel


def _sample(hypermodel, rng):
    """A random assignment from the declared space."""
    hp = keras_tuner.HyperParameters()
    hypermodel.build(hp)  # declares every dimension
    for p in hp.space:
        values = getattr(p, "values", None)
        if values:
            hp.values[p.name] = rng.choice(values)
        elif type(p).__name__ == "Boolean":
            hp.values[p.name] = rng.choice([False, True])
    return hp


def test_every_sampled_model_is_valid_and_trains():
    hypermodel = TransformerHyperModel(
        30,
        30,
        max_length=32,
        num_layers=[1, 2],
        d_model=[12, 20],
        dff=[16, 32],
        warmup_steps=[10, 20],
        batch_size=[4, 8],
    )
    assert hypermodel.space["num_heads"] == [1, 2, 4]  # 8 divides neither 12 nor 20
    rng = random.Random(0)
    x = np.random.default_rng(0).integers(1, 30, (16, 6))
    seen = set()
    # Four draws of seed 0 cover both widths and depths, 1, 2 and 4 heads,
    # and both norm placements.
    for _ in range(4):
        hp = _sample(hypermodel, rng)
        model = hypermodel.build(hp)
        assert hp.values["d_model"] % hp.values["num_heads"] == 0
        assert model.d_model == hp.values["d_model"] and model.norm_first == hp.values["norm_first"]
        # Eagerly: tracing each model's train step would cost more than
        # its few steps; the traced step is the trainer's tests' subject.
        model.run_eagerly = True
        history = hypermodel.fit(hp, model, (x, x), x, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        seen.add((hp.values["d_model"], hp.values["num_heads"]))
    assert len(seen) > 1


@pytest.mark.parametrize("jit_compile", [False, True])
def test_jit_compile_is_passed_to_compile(jit_compile):
    hypermodel = TransformerHyperModel(10, 10, d_model=16, jit_compile=jit_compile)
    assert hypermodel.build(keras_tuner.HyperParameters()).jit_compile is jit_compile


def test_fixed_values_and_errors():
    hypermodel = TransformerHyperModel(10, 10, d_model=16, num_heads=[2, 3, 4])
    assert hypermodel.space["num_heads"] == [2, 4]
    hp = keras_tuner.HyperParameters()
    hypermodel.build(hp)
    assert hp.values["d_model"] == 16
    with pytest.raises(ValueError, match="divides every d_model"):
        TransformerHyperModel(10, 10, d_model=[10, 14], num_heads=[4, 8])
    with pytest.raises(ValueError, match="Unknown search dimensions"):
        TransformerHyperModel(10, 10, learning_rate=[1e-3])


def test_the_0_1_0_argument_names_still_work():
    with pytest.warns(DeprecationWarning) as caught:
        hypermodel = TransformerHyperModel(
            input_vocab_size=50, target_vocab_size=60, dropout_rate=[0.0, 0.3]
        )
    assert {"input_vocab_size", "dropout_rate"} <= {
        name
        for w in caught
        for name in ("input_vocab_size", "dropout_rate")
        if name in str(w.message)
    }
    assert hypermodel.source_vocab_size == 50
    assert hypermodel.space["dropout"] == [0.0, 0.3]
