"""The names of 0.1.0 keep working: code gets a `DeprecationWarning`,
configs saved before load silently, and both give what the new names give."""

import warnings

import keras
import numpy as np
import pytest

from keras_transformer import _renames
from keras_transformer.layers import Decoder, DecoderBlock
from keras_transformer.models import Transformer
from tests.backends import assert_allclose, assert_array_equal

# A model config as 0.1.0 saved it (`run/model_config.json`, `.keras` files).
SAVED_BY_0_1_0 = {
    "name": "transformer",
    "trainable": True,
    "num_layers": 1,
    "d_model": 16,
    "num_heads": 2,
    "dff": 32,
    "input_vocab_size": 30,
    "target_vocab_size": 40,
    "dropout_rate": 0.2,
    "attention_dropout_rate": 0.05,
    "max_length": 64,
    "norm_first": False,
    "share_embeddings": False,
    "activation": "relu",
    "position_encoding": "sinusoidal",
    "layer_norm_epsilon": 1e-6,
    "kernel_initializer": {
        "module": "keras.initializers",
        "class_name": "GlorotUniform",
        "config": {"seed": None},
        "registered_name": None,
    },
    "bias_initializer": {
        "module": "keras.initializers",
        "class_name": "Zeros",
        "config": {},
        "registered_name": None,
    },
}
NEW_VALUES = {"source_vocab_size": 30, "dropout": 0.2, "attention_dropout": 0.05}


def test_a_config_saved_by_0_1_0_loads_silently_under_the_new_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = Transformer.from_config(SAVED_BY_0_1_0)
    config = model.get_config()
    for key, value in NEW_VALUES.items():
        assert config[key] == value
    assert not {"input_vocab_size", "dropout_rate", "attention_dropout_rate"} & set(config)
    assert Transformer.from_config(config).get_config() == config


def test_a_keras_file_with_old_keys_loads(tmp_path):
    model = Transformer.from_config(SAVED_BY_0_1_0)
    model.build(((None, None), (None, None)))
    ids = (np.array([[5, 6, 0]]), np.array([[1, 7]]))
    expected = keras.ops.convert_to_numpy(model(ids))
    serialized = keras.saving.serialize_keras_object(model)
    serialized["config"] = {**serialized["config"], **SAVED_BY_0_1_0}
    for new in NEW_VALUES:
        serialized["config"].pop(new, None)
    again = keras.saving.deserialize_keras_object(serialized)
    again.build(((None, None), (None, None)))
    again.set_weights(model.get_weights())
    assert_allclose(keras.ops.convert_to_numpy(again(ids)), expected, atol=1e-6)


@pytest.mark.parametrize(
    "old, new",
    [
        ({"input_vocab_size": 30}, {"source_vocab_size": 30}),
        ({"source_vocab_size": 30, "dropout_rate": 0.3}, {"source_vocab_size": 30, "dropout": 0.3}),
        (
            {"source_vocab_size": 30, "attention_dropout_rate": 0.0},
            {"source_vocab_size": 30, "attention_dropout": 0.0},
        ),
    ],
)
def test_old_constructor_arguments_warn_and_mean_the_same(old, new):
    common = dict(num_layers=1, d_model=16, num_heads=2, dff=32, target_vocab_size=40, name="model")
    (name,) = set(old) - set(new)
    with pytest.warns(DeprecationWarning, match=f"Transformer\\({name}=...\\)"):
        model = Transformer(**common, **old)
    assert model.get_config() == Transformer(**common, **new).get_config()


def test_both_names_with_different_values_are_refused():
    with pytest.raises(ValueError, match="`dropout` was given under its new and its deprecated"):
        with pytest.warns(DeprecationWarning):
            Transformer(1, 16, 2, 32, 30, 40, dropout=0.1 + 0.2, dropout_rate=0.5)


@pytest.mark.parametrize(
    "new, old, value",
    [("source_vocab_size", "input_vocab_size", 30), ("dropout", "dropout_rate", [0.1])],
)
def test_the_hypermodel_refuses_both_names_with_different_values(new, old, value):
    pytest.importorskip("keras_tuner")
    from keras_transformer.tuning import TransformerHyperModel

    sizes = dict(source_vocab_size=30, target_vocab_size=40)
    with pytest.raises(ValueError, match=f"`{new}` was given under its new and its deprecated"):
        with pytest.warns(DeprecationWarning):
            TransformerHyperModel(**{**sizes, new: value, old: [0.2] if new == "dropout" else 31})
    with pytest.warns(DeprecationWarning):  # the same value under both names is no conflict
        TransformerHyperModel(**{**sizes, new: value, old: value})


@pytest.mark.parametrize(
    "old, new", [("input_vocab_size", "source_vocab_size"), ("dropout_rate", "dropout")]
)
def test_old_attributes_warn_and_read_the_new_ones(old, new):
    model = Transformer.from_config(SAVED_BY_0_1_0)
    with pytest.warns(DeprecationWarning, match=f"Transformer.{old}"):
        assert getattr(model, old) == getattr(model, new)


def _decoder_inputs():
    rng = np.random.default_rng(0)
    return rng.normal(size=(2, 1, 16)).astype("float32"), rng.normal(size=(2, 3, 16)).astype(
        "float32"
    )


@pytest.mark.parametrize("layer_cls", [Decoder, DecoderBlock])
def test_old_cache_methods_warn_and_return_the_same(layer_cls):
    args = (2,) if layer_cls is Decoder else ()
    layer = layer_cls(*args, d_model=16, num_heads=2, dff=32)
    x, memory = _decoder_inputs()
    layer(x, memory)
    with pytest.warns(DeprecationWarning, match="init_self_attention_cache"):
        old = layer.init_cache(2, 4)
    assert_array_equal(old, layer.init_self_attention_cache(2, 4))
    with pytest.warns(DeprecationWarning, match="precompute_cross_attention_cache"):
        old = layer.precompute_cross_cache(memory)
    assert_allclose(old, layer.precompute_cross_attention_cache(memory))


def test_decoder_cache_arguments_keep_their_old_names():
    decoder = Decoder(2, d_model=16, num_heads=2, dff=32)
    x, memory = _decoder_inputs()
    decoder(x, memory)
    cache = decoder.init_self_attention_cache(2, 4)
    cross = decoder.precompute_cross_attention_cache(memory)
    new_out, new_cache = decoder(
        x, self_attention_cache=cache, cross_attention_cache=cross, cache_index=0
    )
    with pytest.warns(DeprecationWarning) as caught:
        old_out, old_cache = decoder(x, cache=cache, cross_cache=cross, cache_index=0)
    assert sorted(str(w.message).split("=")[0] for w in caught) == [
        "`Decoder(cache",
        "`Decoder(cross_cache",
    ]
    assert_allclose(old_out, new_out, atol=1e-6)
    assert_allclose(old_cache, new_cache, atol=1e-6)
    with pytest.raises(TypeError, match="caches"):
        decoder(x, caches=cache, cache_index=0)
    # Tensors under both names cannot be told to agree: refused, not one
    # silently taken.
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="self_attention_cache"):
        decoder(x, self_attention_cache=cache, cache=cache, cache_index=0)


def test_transformer_decode_keeps_its_old_cache_arguments():
    model = Transformer.from_config(SAVED_BY_0_1_0)
    state = model.init_decoding_state(np.array([[5, 6, 7]]), max_length=4)
    common = dict(encoder_padding_mask=state["encoder_mask"], cache_index=0)
    caches = (state["self_attention_cache"], state["cross_attention_cache"])
    ids = np.array([[1]])
    new, _ = model.decode(
        ids, None, self_attention_cache=caches[0], cross_attention_cache=caches[1], **common
    )
    with pytest.warns(DeprecationWarning, match="Transformer.decode"):
        old, _ = model.decode(ids, None, cache=caches[0], cross_cache=caches[1], **common)
    assert_allclose(old, new, atol=1e-6)


def test_translate_config_keeps_a_new_key_over_an_old_one():
    config = {"dropout_rate": 0.5, "dropout": 0.1, "other": 1}
    assert _renames.translate_config(config, {"dropout_rate": "dropout"}) == {
        "dropout": 0.1,
        "other": 1,
    }


def test_the_exports_take_max_length_as_max_output_length(tmp_path):
    # `max_length` is the model's position table; the longest translation
    # is `max_output_length`. The old keyword warns and still counts (here
    # up to the refusal to overwrite an existing folder).
    pytest.importorskip("tensorflow", reason="the exports are TensorFlow SavedModels")
    from keras_transformer.export import export_translator

    with pytest.warns(DeprecationWarning, match="max_output_length"):
        with pytest.raises(FileExistsError):
            export_translator(None, None, None, str(tmp_path), max_length=8)
    with pytest.raises(TypeError, match="max_len"):
        export_translator(None, None, None, str(tmp_path), max_len=8)
