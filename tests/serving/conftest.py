"""What the serving tests share: the trained model and one small export."""

import os
import shutil
import time

import pytest

# The shared export's decoding: beam 2, at most 20 tokens.
MAX_LENGTH = 20
BEAM_SIZE = 2


@pytest.fixture(scope="session")
def serving_export(trained_model, tmp_path_factory):
    """A model base path holding version 1 of the trained model, exported
    once for every serving test; a test that adds or removes versions
    works on a copy (`copy_base`)."""
    from keras_transformer.export import export_version
    from tests.built_once import built_once

    def build(path):
        export_version(*trained_model, os.path.join(path, "translator"),
                       max_output_length=MAX_LENGTH, beam_size=BEAM_SIZE)  # fmt: skip

    return os.path.join(built_once(tmp_path_factory, "serving_export", build), "translator")


def _ignore(warmup):
    from keras_transformer.runtime.warmup_records import WARMUP_PATH

    return None if warmup else shutil.ignore_patterns(os.path.basename(WARMUP_PATH))


def copy_base(base, folder, warmup=True):
    """A copy of the model base path `base` under `folder`; returns its
    path. `warmup=False` leaves out the versions' warmup records, see
    `copy_version`."""
    copy = os.path.join(str(folder), os.path.basename(base))
    shutil.copytree(base, copy, ignore=_ignore(warmup))
    return copy


def copy_version(version, destination, warmup=False):
    """A copy of the export version folder `version` at `destination`;
    returns its path. Without its warmup records unless `warmup`: each
    load replays them, about 5 s of first runs of the tiny export, which
    the tests of swaps, refusals and unloads do not need (tests of the
    warmup keep them)."""
    shutil.copytree(version, destination, ignore=_ignore(warmup))
    return str(destination)


def string_signature(*inputs, outputs=()):
    """A `SignatureDef` whose `inputs` are `[batch]` strings, as every
    signature of an export takes them, and whose `outputs` are strings."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import meta_graph_pb2

    signature = meta_graph_pb2.SignatureDef()
    for name in inputs:
        info = signature.inputs[name]
        info.dtype = types_pb2.DT_STRING
        info.tensor_shape.dim.add(size=-1)
    for name in outputs:
        signature.outputs[name].dtype = types_pb2.DT_STRING
    return signature


def wait_for(condition, seconds, interval=0.05):
    """Polls `condition()` every `interval` seconds until it is true or
    `seconds` have passed; returns its last value. The caller asserts what
    it waited for, with its own message."""
    deadline = time.monotonic() + seconds
    while not (held := condition()) and time.monotonic() < deadline:
        time.sleep(interval)
    return held


def wait_for_status(client, expected, seconds):
    """Polls the model's status until it is `expected`: the server's poll
    of the base path takes its while on a busy host."""
    wait_for(lambda: client.status() == expected, seconds, interval=0.2)
    assert client.status() == expected
