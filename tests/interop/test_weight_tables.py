"""The weight tables the converters read: every weight once, each
transform checked against the other toolkit's formula, both ways."""

import ast
import pathlib

import keras
import numpy as np
import pytest

from keras_transformer.export.ctranslate2 import ctranslate2_rows
from keras_transformer.interop.weight_tables import marian_rows, resolve, to_ours, to_theirs
from keras_transformer.models import Transformer

D_MODEL = 8
PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "keras_transformer"
CONVERTERS = ("interop/marian.py", "interop/weight_tables.py", "interop/checkpoint.py",
              "export/marian.py", "export/ctranslate2.py")  # fmt: skip


def _model(seed=0, norm_first=False, layers=2):
    keras.utils.set_random_seed(seed)
    model = Transformer(num_layers=layers, num_decoder_layers=1, d_model=D_MODEL, num_heads=2,
                        dff=12, source_vocab_size=11, target_vocab_size=13,
                        norm_first=norm_first, dtype="float32")  # fmt: skip
    model.build(((None, None), (None, None)))
    return model


def _block_weights(model):
    blocks = [*model.encoder.blocks, *model.decoder.blocks]
    return sorted(id(v) for block in blocks for v in block.weights)


def test_the_marian_table_names_every_weight_of_the_blocks_once():
    model = _model()
    rows = marian_rows(model)
    assert sorted(id(resolve(model, row.ours)) for row in rows) == _block_weights(model)
    assert len({row.theirs for row in rows}) == len(rows)
    # An encoder block has no cross-attention; the decoder's does.
    assert "model.decoder.layers.0.encoder_attn.k_proj.weight" in {r.theirs for r in rows}
    assert not [r for r in rows if "encoder.layers" in r.theirs and "encoder_attn" in r.theirs]


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_ctranslate2_table_names_every_weight_of_the_blocks_once(norm_first):
    model = _model(norm_first=norm_first)
    found = []
    for row in ctranslate2_rows(model):
        for path in row.ours:
            if row.transform == "norm":
                found += [id(v) for v in resolve(model, path).weights]
            else:
                found += [id(resolve(model, f"{path}_{part}")) for part in ("kernel", "bias")]
    expected = _block_weights(model)
    if norm_first:
        expected = sorted(expected + [id(v) for stack in (model.encoder, model.decoder)
                                      for v in stack.final_norm.weights])  # fmt: skip
    assert sorted(found) == expected


def _row(model, name):
    """The row of the first encoder layer's `name`."""
    (row,) = [r for r in marian_rows(model) if r.theirs == f"model.encoder.layers.0.{name}"]
    return row


@pytest.mark.parametrize("order", ["identity", "shuffled"])
def test_each_transform_computes_what_marian_s_linear_layer_computes(order):
    """Marian's `nn.Linear` is `x @ W.T + b` in its feature order; ours
    contract our kernels' axes. Equal on a random input, features permuted."""
    model = _model()
    rng = np.random.default_rng(0)
    order = np.arange(D_MODEL) if order == "identity" else rng.permutation(D_MODEL)
    block = model.encoder.blocks[0]
    x = rng.normal(size=(5, D_MODEL)).astype(np.float32)  # our features

    def theirs(suffix):
        row = _row(model, suffix)
        return to_theirs(row, resolve(model, row.ours), order)

    roles = block.self_attention.weights_by_role()
    query = np.einsum("bd,dhk->bhk", x, np.asarray(roles["query_kernel"])).reshape(5, -1)
    np.testing.assert_allclose(x[:, order] @ theirs("self_attn.q_proj.weight").T, query, atol=1e-5)
    heads = rng.normal(size=(5, 2, 4)).astype(np.float32)
    out = np.einsum("bhk,hkd->bd", heads, np.asarray(roles["output_kernel"]))
    out_proj = theirs("self_attn.out_proj.weight")
    np.testing.assert_allclose(heads.reshape(5, -1) @ out_proj.T, out[:, order], atol=1e-5)
    ffn = block.feed_forward.weights_by_role()
    hidden = x @ np.asarray(ffn["intermediate_kernel"])
    np.testing.assert_allclose(x[:, order] @ theirs("fc1.weight").T, hidden, atol=1e-5)
    back = hidden @ np.asarray(ffn["output_kernel"])
    np.testing.assert_allclose(hidden @ theirs("fc2.weight").T, back[:, order], atol=1e-5)
    gamma = np.asarray(block.feed_forward_norm.gamma)
    np.testing.assert_array_equal(theirs("final_layer_norm.weight"), gamma[order])


@pytest.mark.parametrize("order", ["identity", "shuffled"])
def test_the_table_goes_both_ways(order):
    source, target = _model(seed=1), _model(seed=2)
    order = np.arange(D_MODEL) if order == "identity" else np.random.default_rng(3).permutation(8)
    tensors = {row.theirs: to_theirs(row, resolve(source, row.ours), order)
               for row in marian_rows(source)}  # fmt: skip
    for row in marian_rows(target):
        to_ours(row, tensors[row.theirs], resolve(target, row.ours), order)
    for row in marian_rows(source):
        np.testing.assert_array_equal(np.asarray(resolve(target, row.ours)),
                                      np.asarray(resolve(source, row.ours)))  # fmt: skip


def test_a_tensor_of_the_wrong_shape_is_refused_naming_it():
    model = _model()
    row = _row(model, "self_attn.q_proj.weight")
    with pytest.raises(ValueError, match=r"q_proj.weight: shape \(8, 6\) does not fit"):
        to_ours(row, np.zeros((8, 6)), resolve(model, row.ours), np.arange(D_MODEL))


@pytest.mark.parametrize(
    "path", ["encoder.blocks.0.self_attention.gate_kernel", "encoder.blocks.0._feed_forward"]
)
def test_a_path_that_names_nothing_public_is_refused(path):
    with pytest.raises(ValueError, match="has no"):
        resolve(_model(layers=1), path)


def _private_reads(source):
    """Each read of an attribute named `_...` (not `__...__`) in `source`."""
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr.startswith("_")
            and not node.attr.startswith("__")]  # fmt: skip


@pytest.mark.parametrize("converter", CONVERTERS)
def test_no_converter_reads_a_private_attribute(converter):
    assert _private_reads((PACKAGE / converter).read_text(encoding="utf-8")) == []


def test_the_private_attribute_check_finds_one():
    source = "def f(layer):\n    return layer._query_dense.kernel, layer.__class__\n"
    assert _private_reads(source) == ["2: layer._query_dense"]
