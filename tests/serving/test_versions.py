"""`versions`: version folders, empty outputs, labels and the watcher."""

import os
import threading
import time

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from keras_transformer._version_folders import versions as export_versions
from keras_transformer.serving.model_config import ModelEntry
from keras_transformer.serving.versions import (
    ModelManager,
    empty_outputs,
    fingerprint,
    parse_version_folder,
    version_folders,
)


@pytest.mark.parametrize(
    "name,version",
    [("1", 1), ("05", 5), ("0", 0), ("12a", None), ("-1", None), ("٣", None), ("1.0", None),
     (" 1", None), ("9" * 20, None), ("", None), (str(2**63 - 1), 2**63 - 1)],
)  # fmt: skip
def test_version_folders_are_ascii_digits_within_int64(name, version):
    assert parse_version_folder(name) == version


def test_the_exporter_and_the_server_read_folders_alike(tmp_path):
    for name in ("1", "05", "5", "x", "9" * 20, "007"):
        (tmp_path / name).mkdir()
    (tmp_path / "3").write_text("a file, not a version")
    found = version_folders(str(tmp_path))
    assert found == {1: str(tmp_path / "1"), 5: str(tmp_path / "5"), 7: str(tmp_path / "007")}
    assert export_versions(str(tmp_path)) == [1, 5, 7]
    assert export_versions(str(tmp_path / "missing")) == []
    with pytest.raises(OSError):
        version_folders(str(tmp_path / "missing"))


def test_empty_outputs_have_the_declared_dtypes_and_no_rows():
    signature = meta_graph_pb2.SignatureDef()
    for name, dtype, dims in (("translation", types_pb2.DT_STRING, [-1]),
                              ("score", types_pb2.DT_FLOAT, [-1]),
                              ("translations", types_pb2.DT_STRING, [-1, 4]),
                              ("weights", types_pb2.DT_FLOAT, [-1, -1, -1])):  # fmt: skip
        info = signature.outputs[name]
        info.dtype = dtype
        for size in dims:
            info.tensor_shape.dim.add(size=size)
    outputs = empty_outputs(signature)
    assert outputs["translation"].dtype == object and outputs["translation"].shape == (0,)
    assert outputs["score"].dtype == np.float32
    assert outputs["translations"].shape == (0, 4)
    assert outputs["weights"].shape == (0, 0, 0)


def test_fingerprint_changes_with_any_file(tmp_path):
    (tmp_path / "a").write_text("x")
    before = fingerprint(str(tmp_path))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_text("y")
    assert fingerprint(str(tmp_path)) != before


def test_a_manager_relabels_and_its_stop_ends_its_watcher(tmp_path):
    threads = threading.active_count()
    manager = ModelManager(str(tmp_path), "m", poll_seconds=0.05, version_labels={"a": 1})
    assert threading.active_count() == threads + 1
    entry = ModelEntry("m", str(tmp_path), version_labels=(("b", 2),))
    manager.relabel(entry)
    assert manager.version_for_label("b") == 2 and manager.entry is entry
    with pytest.raises(ValueError, match="Unrecognized servable version label: a"):
        manager.version_for_label("a")
    with pytest.raises(ValueError, match="label"):
        manager.relabel(ModelEntry("m", str(tmp_path), version_labels=(("c", -1),)))
    assert manager.version_for_label("b") == 2  # a refused relabel changes nothing
    start = time.monotonic()
    manager.stop()
    assert time.monotonic() - start < 5 and threading.active_count() == threads


def test_a_manager_needs_its_base_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="base path"):
        ModelManager(os.path.join(str(tmp_path), "nope"), "m", poll_seconds=0)


def test_a_version_gives_memory_back_once_warmed_up(serving_export, monkeypatch):
    # Warmup is where a compiled version's programs compile: what XLA
    # used goes back to the system then, not at some later unload.
    from keras_transformer.serving import versions

    events = []
    run = versions.SessionModel.run

    def counted_run(self, *args, **kwargs):
        events.append("request")
        return run(self, *args, **kwargs)

    monkeypatch.setattr(versions.SessionModel, "run", counted_run)
    monkeypatch.setattr(versions, "_return_freed_memory", lambda: events.append("returned"))
    version = versions.Version(1, os.path.join(serving_export, "1"), batching={})
    try:
        assert version.warmed_up > 0
        assert events.count("request") == version.warmed_up
        assert events[-1] == "returned" and events.count("returned") == 1
    finally:
        version.retire()
    assert events.count("returned") == 2  # and once more when unloaded
