"""`xla_cache`: TensorFlow's persistent XLA cache, set up for a server.

That a server reads back what an earlier one compiled is shown with a real
`--jit-compile` export in `tests/export/test_compiled_export.py`.
"""

import os

import pytest
import tensorflow as tf

from keras_transformer.runtime import xla_cache

DIRECTORY_FLAG = "--tf_xla_persistent_cache_directory"
PREFIX_FLAG = "--tf_xla_persistent_cache_prefix"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no cache enabled and its own TF_XLA_FLAGS."""
    monkeypatch.setattr(xla_cache, "_enabled", None)
    # Set first so that monkeypatch restores it: a flag `enable` leaves
    # behind would reach every later process of this test worker.
    monkeypatch.setenv("TF_XLA_FLAGS", "")
    monkeypatch.delenv("TF_XLA_FLAGS")


def _flags():
    return dict(flag.partition("=")[::2] for flag in os.environ["TF_XLA_FLAGS"].split())


def test_enable_sets_the_directory_and_a_prefix_of_this_tensorflow(tmp_path):
    directory = tmp_path / "new" / "cache"
    prefix = xla_cache.enable(str(directory))
    assert directory.is_dir() and not list(directory.iterdir())  # its probe is gone
    assert _flags() == {DIRECTORY_FLAG: str(directory), PREFIX_FLAG: prefix}
    assert prefix == xla_cache.cache_prefix()
    assert f"_tf{tf.version.VERSION}_" in prefix


@pytest.mark.parametrize(
    "flags",
    ["--tf_xla_cpu_global_jit", "--tf_xla_cpu_global_jit --tf_xla_persistent_cache_prefix=p"],
)
def test_enable_keeps_the_other_flags(tmp_path, monkeypatch, flags):
    monkeypatch.setenv("TF_XLA_FLAGS", flags)
    xla_cache.enable(str(tmp_path))
    assert "--tf_xla_cpu_global_jit" in os.environ["TF_XLA_FLAGS"].split()
    assert _flags()[PREFIX_FLAG] == xla_cache.cache_prefix()  # ours, not a stale one


def test_enable_accepts_the_directory_the_flags_already_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", f"{DIRECTORY_FLAG}={tmp_path}")
    xla_cache.enable(str(tmp_path))
    assert os.environ["TF_XLA_FLAGS"].count(DIRECTORY_FLAG) == 1


@pytest.mark.parametrize("also_ours", [False, True])
def test_enable_refuses_a_second_directory_and_names_it(tmp_path, monkeypatch, also_ours):
    flags = f"{DIRECTORY_FLAG}=/elsewhere"
    if also_ours:
        flags = f"{DIRECTORY_FLAG}={tmp_path} {flags}"
    monkeypatch.setenv("TF_XLA_FLAGS", flags)
    with pytest.raises(ValueError, match=r"already names an XLA cache directory \(/elsewhere\)"):
        xla_cache.enable(str(tmp_path))
    assert os.environ["TF_XLA_FLAGS"] == flags


@pytest.mark.parametrize("kind", ["under a file", "white space"])
def test_enable_refuses_a_directory_it_cannot_use(tmp_path, kind):
    if kind == "under a file":
        (tmp_path / "file").write_text("x")
        directory, match = tmp_path / "file" / "cache", "cannot be written"
    else:
        directory, match = tmp_path / "a cache", "white space"
    with pytest.raises(ValueError, match=match):
        xla_cache.enable(str(directory))
    assert "TF_XLA_FLAGS" not in os.environ and xla_cache.entries() is None


def test_entries_counts_this_prefix_only(tmp_path):
    assert xla_cache.entries() is None
    prefix = xla_cache.enable(str(tmp_path))
    # Two of this prefix; TensorFlow's default prefix; a longer prefix.
    for name in (f"{prefix}__1__2", f"{prefix}__3__4", "xla_compile_cache__1__2", f"{prefix}x__5"):
        (tmp_path / f"{name}__XLA_CPU_JIT.pb").write_bytes(b"")
    assert xla_cache.entries() == 2


def test_the_prefix_names_the_processor(monkeypatch):
    # Code compiled for one instruction set may not run on another.
    prefixes = set()
    for flags in ("fpu sse2 avx2", "fpu sse2 avx2 avx512f"):
        monkeypatch.setattr(xla_cache, "_cpu_features", lambda flags=flags: flags)
        prefixes.add(xla_cache.cache_prefix())
    assert len(prefixes) == 2


@pytest.mark.parametrize("existing,stored", [(0, 0), (3, 0), (0, 3), (3, 3)])
def test_a_version_says_what_it_compiled_and_when_the_cache_was_unused(
    tmp_path, caplog, existing, stored
):
    from keras_transformer.export.compiled import write_export_info
    from keras_transformer.serving.versions import Version

    export = str(tmp_path / "1")
    write_export_info(export, {"jit_compile": True, "programs": 3})
    version = Version.__new__(Version)  # its load and warmup are not what is tested
    version.number, version.path, version.xla_programs_compiled = 1, export, None
    with caplog.at_level("INFO", logger="keras_transformer.serve"):
        # The cache's entries before the warmup, then after what it stored.
        version._report_xla_cache(existing, existing + stored)
    if existing + stored == 0:
        # TensorFlow read TF_XLA_FLAGS before the cache was enabled.
        assert "XLA cache was not used" in caplog.text
        assert version.xla_programs_compiled is None
    else:
        assert f"{stored} of its 3 XLA programs compiled" in caplog.text
        assert version.xla_programs_compiled == stored
