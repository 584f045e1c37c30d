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
    with pytest.raises(ValueError, match="Unknown search dimension .learning_rate."):
        TransformerHyperModel(10, 10, learning_rate=[1e-3])


def test_ranges_are_keras_tuners_int_and_float():
    hypermodel = TransformerHyperModel(
        30,
        30,
        max_length=16,
        d_model={"min": 8, "max": 24, "step": 8},
        num_heads=[1, 2, 4, 8],
        dropout={"min": 0.0, "max": 0.3, "step": 0.05},
        lr_scale={"min": 0.5, "max": 2.0, "sampling": "log"},
        attention_dropout=[0.0, 0.1],
        num_decoder_layers={"min": 1, "max": 3},
        share_embeddings=[False, True],
        num_layers=1,
        dff=16,
    )
    # Every head count kept divides each d_model of the range (8, 16, 24).
    assert hypermodel.space["num_heads"] == [1, 2, 4, 8]
    narrower = TransformerHyperModel(30, 30, d_model={"min": 8, "max": 12, "step": 4})
    assert narrower.space["num_heads"] == [1, 2, 4]  # 8 does not divide 12
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    kinds = {p.name: type(p).__name__ for p in hp.space}
    assert kinds["d_model"] == kinds["num_decoder_layers"] == "Int"
    assert kinds["dropout"] == kinds["lr_scale"] == "Float"
    assert kinds["share_embeddings"] == "Boolean" and kinds["attention_dropout"] == "Choice"
    dropout = next(p for p in hp.space if p.name == "dropout")
    assert (dropout.min_value, dropout.max_value, dropout.step) == (0.0, 0.3, 0.05)
    assert next(p for p in hp.space if p.name == "lr_scale").sampling == "log"
    # The defaults of the space: the model's own where a dimension is None.
    assert model.num_decoder_layers == hp.values["num_decoder_layers"]
    hp = keras_tuner.HyperParameters()
    hp.Fixed("lr_scale", 2.0)
    hp.Fixed("warmup_steps", 100)
    hp.Fixed("d_model", 16)
    model = hypermodel.build(hp)
    # The paper's schedule, scaled: at the first step, 2 * 16 ** -0.5 * 100 ** -1.5
    # (its peak, at step 100, is 2 * 16 ** -0.5 * 100 ** -0.5).
    first = float(model.optimizer.learning_rate)
    assert abs(first - 2.0 * 16**-0.5 * 100**-1.5) < 1e-9


def test_defaults_leave_the_optional_dimensions_to_the_model():
    hypermodel = TransformerHyperModel(30, 40, d_model=16, num_layers=2, dropout=0.2)
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    assert "num_decoder_layers" not in hp.values and "attention_dropout" not in hp.values
    assert model.num_decoder_layers == 2 and model.attention_dropout is None
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        TransformerHyperModel(30, 40, share_embeddings=True)


def test_a_build_model_of_ones_own_wraps_ours():
    hypermodel = TransformerHyperModel(30, 30, d_model=16, num_layers=1, dff=16)

    def build_model(hp):
        model = hypermodel.build(hp)
        model.optimizer.clipnorm = hp.Float("clipnorm", 0.5, 2.0)
        return model

    hp = keras_tuner.HyperParameters()
    model = build_model(hp)
    assert {"d_model", "clipnorm"} <= set(hp.values)
    assert model.optimizer.clipnorm == hp.values["clipnorm"]
