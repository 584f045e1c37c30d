"""Records in, shards out: every line once, keyed; clear errors; no partial shard."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from keras_transformer.corpus.records import (
    ShardWriter,
    count_records,
    iter_records,
    read_records,
    read_shards,
)


def _write(path, text, gz=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


def test_every_line_is_a_record_keyed_by_file_and_line(tmp_path):
    _write(tmp_path / "b.txt", "Ein Satz.\n\nnoch einer\n")
    _write(tmp_path / "a.txt.gz", "first\n", gz=True)
    records = read_records(str(tmp_path / "*"))
    assert [(os.path.basename(r["file"]), r["line"], r["source"]) for r in records] == [
        ("a.txt.gz", 0, "first"), ("b.txt", 0, "Ein Satz."), ("b.txt", 1, ""),
        ("b.txt", 2, "noch einer"),
    ]  # fmt: skip


def test_a_file_of_blank_lines_is_its_records_and_an_empty_file_has_none(tmp_path):
    # A shard of a split corpus may hold blank lines only, or nothing: each
    # blank line is still a record, and a pair of empty files pairs.
    _write(tmp_path / "a.en", "\n\n")
    _write(tmp_path / "a.de", "\n\n")
    _write(tmp_path / "b.en", "")
    _write(tmp_path / "b.de", "")
    _write(tmp_path / "c.en", "last\n")
    _write(tmp_path / "c.de", "letzte\n")
    records = read_records(str(tmp_path / "*.en"), str(tmp_path / "*.de"))
    assert [(os.path.basename(r["file"]), r["line"], r["source"], r["target"])
            for r in records] == [("a.en", 0, "", ""), ("a.en", 1, "", ""),
                                  ("c.en", 0, "last", "letzte")]  # fmt: skip
    assert count_records(str(tmp_path / "*.en")) == 3


def test_a_double_star_reaches_into_subfolders_and_folders_are_no_input(tmp_path):
    for name in ("top.en", "a/one.en", "a/b/two.en"):
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        _write(tmp_path / name, name + "\n")
    os.makedirs(tmp_path / "a" / "folder.en")  # matched by the pattern, not a file
    records = read_records(str(tmp_path / "**" / "*.en"))
    assert [r["source"] for r in records] == ["a/b/two.en", "a/one.en", "top.en"]


def test_targets_pair_with_the_inputs_in_sorted_order(tmp_path):
    for name in ("1.en", "2.en"):
        _write(tmp_path / name, "a\nb\n")
    for name in ("1.de", "2.de"):
        _write(tmp_path / name, f"{name} x\n{name} y\n")
    records = read_records(str(tmp_path / "*.en"), str(tmp_path / "*.de"))
    assert [r["target"] for r in records] == ["1.de x", "1.de y", "2.de x", "2.de y"]


@pytest.mark.parametrize(
    "files,target,match",
    [
        ({}, None, "--input '.*nothing-\\*' matches no file"),
        ({"a.en": "x\n"}, "*.de", "--target '.*' matches no file"),
        ({"a.en": "x\ny\n", "a.de": "x\n"}, "*.de", "a.de has 1 line and .*a.en 2"),
        ({"a.en": "x\n", "a.de": "x\ny\nz\n"}, "*.de", "a.de has 3 lines and .*a.en 1"),
        ({"a.en": "x\n", "b.en": "y\n", "a.de": "x\n"}, "*.de", "matches 1 file and --input 2"),
        ({"a.en": b"ok\n\xff\xfe bad\n"}, None, "a.en: line 2 is not UTF-8"),
    ],
)
def test_bad_input_is_named_in_one_line(tmp_path, files, target, match):
    for name, text in files.items():
        _write(tmp_path / name, text)
    pattern = str(tmp_path / ("*.en" if files else "nothing-*"))
    target = None if target is None else str(tmp_path / target)
    for read in (read_records, count_records, lambda *globs: list(iter_records(*globs))):
        with pytest.raises(ValueError, match=match):
            read(pattern, target)


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_ends_at_a_newline_only(tmp_path, gz):
    # What `sed -n` numbers: CRLF endings dropped; separators that
    # str.splitlines would split at stay inside their sentence.
    inside = ["a\u2028b", "form\x0cfeed", "next\x85line", "group\x1dsep", "car\rriage"]
    suffix = ".gz" if gz else ""
    source = _write(tmp_path / f"in.en{suffix}", "\r\n".join(inside) + "\r\n", gz=gz)
    target = _write(tmp_path / f"in.de{suffix}", "\n".join(f"t{i}" for i in range(5)), gz=gz)
    records = read_records(source, target)
    assert [r["source"] for r in records] == inside
    assert [r["target"] for r in records] == [f"t{i}" for i in range(5)]
    assert count_records(source) == len(inside)


def test_shards_appear_whole_or_not_at_all(tmp_path):
    prefix = str(tmp_path / "out" / "job")
    with ShardWriter(prefix, shards=2) as writer:
        for i in range(5):
            writer.write({"file": "f", "line": i, "source": "ü" * i})
        assert not any(name.endswith(".jsonl") for name in os.listdir(tmp_path / "out"))
        paths = writer.close()
    assert [os.path.basename(p) for p in paths] == [
        "job-00000-of-00002.jsonl", "job-00001-of-00002.jsonl",
    ]  # fmt: skip
    with open(paths[0], encoding="utf-8") as f:
        assert json.loads(f.readline())["source"] == ""
    assert [r["line"] for r in read_shards(prefix)] == [0, 1, 2, 3, 4]
    with pytest.raises(FileExistsError, match="another --output"):
        ShardWriter(prefix)
    with ShardWriter(prefix + "-more") as other:  # a longer prefix is another job's
        other.write({"file": "g", "line": 0})
        other.close()
    assert len(read_shards(prefix)) == 5 and len(read_shards(prefix + "-more")) == 1
    with pytest.raises(RuntimeError):
        with ShardWriter(str(tmp_path / "failed")) as writer:
            writer.write({"file": "f", "line": 0})
            raise RuntimeError("the engine died")
    assert os.listdir(tmp_path) == ["out"]  # nothing of the failed job is left


def test_more_shards_than_the_soft_open_file_limit_are_written(tmp_path):
    # `ulimit -n` is often 1,024: the writer raises its soft limit to
    # hold every shard open, up to the hard limit.
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))
    if hard != resource.RLIM_INFINITY and hard < held + 400:
        pytest.skip("the hard limit on open files is below this test's needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 100, hard))
    try:
        prefix = str(tmp_path / "job")
        with ShardWriter(prefix, shards=300) as writer:
            for i in range(600):
                writer.write({"file": "f", "line": i})
            writer.close()
        assert [r["line"] for r in read_shards(prefix)] == list(range(600))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_more_shards_than_the_hard_limit_are_refused_in_one_line(tmp_path):
    pytest.importorskip("resource")
    # In a process of its own: a lowered hard limit cannot be raised again.
    script = f"""
import os, resource
held = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (held + 50, held + 50))
from keras_transformer.corpus.records import ShardWriter
try:
    ShardWriter({str(tmp_path / "job")!r}, shards=200)
except OSError as error:
    print(error)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout  # fmt: skip
    assert "--shards 200 needs 200 files open at once" in out and "give fewer shards" in out
    assert os.listdir(tmp_path) == []  # nothing opened, nothing left
