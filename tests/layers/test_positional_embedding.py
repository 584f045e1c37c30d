import keras
import numpy as np
import pytest

from keras_transformer.layers import PositionalEmbedding
from tests import reference
from tests.backends import assert_allclose, assert_array_equal, to_numpy


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("start_index", [0, 3])
def test_sinusoidal_embedding_matches_formula(scale, start_index):
    layer = PositionalEmbedding(20, 8, max_length=16, scale_embeddings=scale)
    ids = np.array([[3, 4, 5, 0], [7, 1, 0, 0]])
    out = to_numpy(layer(ids, start_index=start_index))
    table = np.array(layer.embeddings)
    factor = np.sqrt(8) if scale else 1.0
    pe = reference.position_encoding(16, 8)[start_index : start_index + 4]
    assert_allclose(out, table[ids] * factor + pe[None], atol=1e-5)


@pytest.mark.parametrize("start_index", [0, 3, "tensor"])
def test_halves_layout_adds_the_reordered_table(start_index):
    layer = PositionalEmbedding(20, 8, max_length=16, position_layout="halves")
    ids = np.array([[3, 4, 5, 0]])
    start = keras.ops.convert_to_tensor(2) if start_index == "tensor" else start_index
    first = 2 if start_index == "tensor" else start_index
    out = to_numpy(layer(ids, start_index=start))
    pe = reference.position_encoding(16, 8)[first : first + 4][:, [0, 2, 4, 6, 1, 3, 5, 7]]
    assert_allclose(out, np.array(layer.embeddings)[ids] * np.sqrt(8) + pe, atol=1e-5)
    restored = PositionalEmbedding.from_config(layer.get_config())
    assert restored.position_layout == "halves"


def test_the_table_is_there_from_construction_and_none_for_learned_positions():
    layer = PositionalEmbedding(20, 8, max_length=16, position_layout="halves")
    expected = reference.position_encoding(16, 8)[:, [0, 2, 4, 6, 1, 3, 5, 7]]
    assert_allclose(layer.encoding_table, expected, atol=1e-6)
    learned = PositionalEmbedding(20, 8, max_length=10, position_encoding="learned")
    assert learned.encoding_table is None


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="TensorFlow graphs")
def test_traced_functions_capture_a_held_table_instead_of_copying_it():
    import tensorflow as tf

    layer = PositionalEmbedding(20, 8, max_length=64)

    def trace():
        # Positions known only at run time: the graph reads the whole table.
        fn = tf.function(lambda ids, start: layer(ids, start_index=start))
        return fn.get_concrete_function(
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)
        ).graph

    graphs = [trace(), trace()]
    for graph in graphs:
        tables = [
            op for op in graph.get_operations() if op.outputs and op.outputs[0].shape == (64, 8)
        ]
        assert [op.type for op in tables] == ["Placeholder"]  # captured, not a constant
    captured = [[id(tensor) for tensor, _ in graph.captures] for graph in graphs]
    assert captured[0] == captured[1]  # the same tensor in both


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="TensorFlow graphs")
def test_known_positions_trace_only_their_rows():
    import tensorflow as tf

    layer = PositionalEmbedding(20, 8, max_length=64)
    graph = (
        tf.function(lambda ids: layer(ids, start_index=3))
        .get_concrete_function(tf.TensorSpec([2, 5], tf.int32))
        .graph
    )
    shapes = [op.outputs[0].shape for op in graph.get_operations() if op.type == "Const"]
    assert (5, 8) in shapes and (64, 8) not in shapes


def test_learned_positions():
    layer = PositionalEmbedding(20, 8, max_length=10, position_encoding="learned")
    ids = np.array([[3, 4, 5]])
    out = to_numpy(layer(ids, start_index=2))
    positions = np.array(layer.position_embedding.embeddings)
    expected = np.array(layer.embeddings)[ids] * np.sqrt(8) + positions[2:5][None]
    assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("mask_zero", [True, False])
def test_mask_is_nonzero_ids(mask_zero):
    layer = PositionalEmbedding(20, 8, mask_zero=mask_zero)
    ids = np.array([[3, 0, 5, 0]])
    mask = layer.compute_mask(ids)
    if mask_zero:
        assert_array_equal(mask, ids != 0)
        assert_array_equal(layer(ids)._keras_mask, ids != 0)
    else:
        assert mask is None


def test_mask_propagates_in_a_functional_model():
    inputs = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(20, 8)(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, pooled)
    ids = np.array([[3, 4, 0, 0]])
    expected = to_numpy(PositionalEmbedding.__call__(model.layers[1], ids))[:, :2].mean(1)
    assert_allclose(model(ids), expected, atol=1e-5)


def test_too_long_sequence_is_a_clear_error():
    layer = PositionalEmbedding(20, 8, max_length=4)
    with pytest.raises(ValueError, match="max_length=4"):
        layer(np.ones((1, 5), "int32"))
    with pytest.raises(ValueError, match="max_length=4"):
        layer(np.ones((1, 2), "int32"), start_index=3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(vocab_size=0, d_model=4), "vocab_size"),
        (dict(vocab_size=4, d_model=None), "d_model"),
        (dict(vocab_size=4, d_model=4, max_length=0), "max_length"),
        (dict(vocab_size=4, d_model=4, position_encoding="rotary"), "position_encoding"),
        (dict(vocab_size=4, d_model=4, position_layout="odd"), "position_layout"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PositionalEmbedding(**kwargs)
