"""The contract every public layer keeps, checked the same way for each
(after keras-hub's `run_layer_test`, `run_serialization_test` and
`run_precision_test`).

A `LayerCase` names how to make the layer and what to call it with; the
`check_*` functions take one case each:

- `check_config_round_trip`: `from_config(get_config())` gives the same
  config, and Keras' registered serialization finds the class;
- `check_saved_model`: a functional model around the layer saves to
  `.keras` and loads into the same outputs;
- `check_mixed_precision`: under `mixed_float16` and `mixed_bfloat16` the
  variables stay float32, the outputs take the compute dtype, and they
  match the float32 layer with the same weights;
- `check_mask_propagation`: in a functional model, the padding mask of
  the (first) input arrives unchanged at the next layer.
"""

import dataclasses
from collections.abc import Callable

import keras
import numpy as np

from tests.backends import assert_allclose, assert_array_equal, to_numpy


@dataclasses.dataclass
class LayerCase:
    """One public layer under the contract.

    Attributes:
        make: `make(**kwargs) -> layer`; kwargs are base layer arguments
            (`dtype`).
        inputs: the call's positional inputs, as NumPy arrays; a 0 in an
            int input, or an all-zero row of a float input, is padding.
        call_kwargs: keyword arguments of every call.
        masked: whether the layer takes and passes on a padding mask.
    """

    make: Callable
    inputs: tuple
    call_kwargs: dict = dataclasses.field(default_factory=dict)
    masked: bool = True


def _symbolic_inputs(case):
    return [
        keras.Input(
            shape=(None,) * (x.ndim - 2) + x.shape[-1:] if x.ndim > 2 else (None,),
            dtype=str(x.dtype),
        )  # fmt: skip
        for x in case.inputs
    ]


def _call(layer, inputs, case):
    return layer(*inputs, **case.call_kwargs)


def check_config_round_trip(case):
    layer = case.make()
    config = layer.get_config()
    again = type(layer).from_config(config)
    assert again.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"keras_transformer>{type(layer).__name__}"
    restored = keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is type(layer) and restored.get_config() == config


def check_saved_model(case, tmp_path):
    symbolic = _symbolic_inputs(case)
    model = keras.Model(symbolic, _call(case.make(), symbolic, case))
    path = tmp_path / "layer.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    expected = to_numpy(model(list(case.inputs)))
    assert_allclose(to_numpy(restored(list(case.inputs))), expected, atol=1e-6)


def check_mixed_precision(case, policy, tolerance):
    # The reference's weights are drawn from a fixed seed: drawn from
    # whatever state earlier tests left, one weight set in hundreds put an
    # element of bfloat16's Decoder just past its tolerance.
    keras.utils.set_random_seed(0)
    reference = case.make()
    expected = to_numpy(_call(reference, case.inputs, case))
    layer = case.make(dtype=policy)
    _call(layer, case.inputs, case)  # builds it
    layer.set_weights(reference.get_weights())
    outputs = _call(layer, case.inputs, case)
    compute = keras.mixed_precision.Policy(policy).compute_dtype
    assert keras.backend.standardize_dtype(outputs.dtype) == compute
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)
    outputs = to_numpy(keras.ops.cast(outputs, "float32"))
    scale = max(1.0, float(np.abs(expected).max()))
    assert_allclose(outputs, expected, atol=tolerance * scale)


class _MaskProbe(keras.layers.Layer):
    """Outputs the mask it receives (1.0 on tokens)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        assert mask is not None, "no mask arrived"
        return keras.ops.cast(mask, "float32")

    def compute_mask(self, inputs, mask=None):
        return None


def _padding(x):
    return x != 0 if x.ndim == 2 else np.any(x != 0, axis=-1)


def check_mask_propagation(case):
    symbolic = _symbolic_inputs(case)
    masked = [
        keras.layers.Masking(0.0)(x) if x.dtype == "float32" and len(x.shape) == 3 else x
        for x in symbolic
    ]
    outputs = _call(case.make(), masked, case)
    model = keras.Model(symbolic, _MaskProbe()(outputs))
    assert_array_equal(
        to_numpy(model(list(case.inputs))), _padding(case.inputs[0]).astype("float32")
    )
