"""Checks that a SavedModel runs in TensorFlow Serving as it is."""

import functools
import json
import os
import subprocess
import sys

from tensorflow.core.protobuf import saved_model_pb2

from keras_transformer.runtime.export_info import XLA_FLAG, read_export_info

_LIST_SERVING_OPS = """
import json
import tensorflow as tf
import tensorflow_text  # TF Serving links tensorflow-text's op library
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api
ops = op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(c_api.TF_GetAllOpList()))
print(json.dumps(sorted(op.name for op in ops.op)))
"""


class NotServableError(ValueError):
    """The SavedModel uses something TF Serving does not have."""


def graph_ops(export_dir):
    """All op types in the SavedModel's graph and function library, and
    the functions marked for XLA compilation."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops, xla_functions = set(), []
    for meta_graph in proto.meta_graphs:
        ops |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            ops |= {node.op for node in function.node_def}
            attrs = function.attr
            if attrs.get("_XlaMustCompile") and attrs["_XlaMustCompile"].b:
                xla_functions.append(function.signature.name)
            for node in function.node_def:
                if node.attr.get("_XlaMustCompile") and node.attr["_XlaMustCompile"].b:
                    xla_functions.append(f"{function.signature.name}/{node.name}")
    return ops, xla_functions


@functools.cache
def serving_ops():
    """The op types of TensorFlow's core and TensorFlow Text, as a process
    that loads only those two registers them: this process may have loaded
    other op libraries, which TF Serving would not have. Listed once a
    process (a fresh interpreter takes some seconds to import TensorFlow),
    for every export it checks."""
    result = subprocess.run(
        [sys.executable, "-c", _LIST_SERVING_OPS],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if result.returncode != 0:
        raise RuntimeError(f"Could not list TF Serving's ops: {result.stderr[-2000:]}")
    return frozenset(json.loads(result.stdout.strip().splitlines()[-1]))


def check_servable(export_dir):
    """Raises `NotServableError` naming any op TF Serving would not have.

    TF Serving has TensorFlow's core ops plus the TensorFlow Text ops; the
    check lists the graph's ops and looks each up in a fresh process that
    loads only `tensorflow` and `tensorflow_text`. It also refuses functions
    compiled with XLA and XLA's own ops, which TF Serving runs only when
    started with `--xla_cpu_compilation_enabled=true`, unless the export
    says it was built for that (`export_translator(jit_compile=True)`
    writes `assets.extra/keras_transformer.json`); there, XLA is allowed
    and only ops TF Serving lacks are refused.

    Returns:
        The sorted list of op types in the graph.
    """
    ops, xla_functions = graph_ops(export_dir)
    if not read_export_info(export_dir).get("jit_compile"):
        xla_ops = sorted(op for op in ops if op.startswith("Xla") or op.startswith("_Xla"))
        if xla_ops:
            raise NotServableError(
                f"{export_dir} uses XLA-only ops, which TF Serving runs without XLA: "
                f"{xla_ops}; export with --jit-compile (served with {XLA_FLAG})"
            )
        if xla_functions:
            raise NotServableError(
                f"{export_dir} has functions compiled with XLA (jit_compile), which TF "
                f"Serving runs without XLA: {sorted(xla_functions)[:10]}; export with "
                f"--jit-compile (served with {XLA_FLAG})"
            )
    unknown = sorted(ops - serving_ops())
    if unknown:
        raise NotServableError(
            f"{export_dir} uses ops that TF Serving (TensorFlow core + TensorFlow Text) "
            f"does not have: {unknown}"
        )
    return sorted(ops)
