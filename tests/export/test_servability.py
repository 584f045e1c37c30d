import os
import shutil

import pytest
import tensorflow as tf

from keras_transformer.export import NotServableError, check_servable
from keras_transformer.export.servability import graph_ops


def test_graph_is_servable_without_xla(export_base):
    ops = check_servable(os.path.join(export_base, "1"))
    assert "SentencepieceOp" in ops and ("While" in ops or "StatelessWhile" in ops)
    assert not any(op.startswith("Xla") for op in ops)


def test_unknown_op_is_named(export_base, tmp_path):
    from tensorflow.core.protobuf import saved_model_pb2

    broken = str(tmp_path / "broken")
    shutil.copytree(os.path.join(export_base, "1"), broken)
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(broken, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    proto.meta_graphs[0].graph_def.library.function[0].node_def[0].op = "FancyCustomOp"
    with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
        f.write(proto.SerializeToString())
    with pytest.raises(NotServableError, match="FancyCustomOp"):
        check_servable(broken)


def test_xla_functions_are_refused(tmp_path):
    module = tf.Module()
    module.f = tf.function(
        lambda x: x * 2, jit_compile=True, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    tf.saved_model.save(module, str(tmp_path / "xla"))
    with pytest.raises(NotServableError, match="XLA"):
        check_servable(str(tmp_path / "xla"))


def test_graph_ops_lists_the_function_library(tmp_path):
    module = tf.Module()
    module.f = tf.function(
        lambda x: tf.linalg.matmul(x, x) + 1.0, input_signature=[tf.TensorSpec([2, 2], tf.float32)]
    )
    tf.saved_model.save(module, str(tmp_path / "plain"))
    ops, xla_functions = graph_ops(str(tmp_path / "plain"))
    assert {"MatMul", "AddV2"} <= ops and xla_functions == []
    assert check_servable(str(tmp_path / "plain")) == sorted(ops)
