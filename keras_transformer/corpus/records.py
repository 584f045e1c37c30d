"""A corpus as keyed records in, JSON Lines shards out.

Every input line is one record, keyed by its file and its 0-based line
number, so that whatever order an engine answers in, the corpus is
reassembled by key; an empty line is a record too. Shards are written
under a temporary name and renamed once whole: a job that dies leaves no
partial shard.
"""

import glob
import json
import os
import uuid

from keras_transformer.data.sources import read_lines


def _files(pattern, flag):
    files = sorted(glob.glob(pattern))
    if not files:
        raise ValueError(f"{flag} {pattern!r} matches no file")
    return files


def read_records(input_glob, target_glob=None):
    """The records of the files `input_glob` matches, in order.

    Args:
        input_glob: source files, one sentence a line (plain or `.gz`, UTF-8).
        target_glob: for scoring, their line-aligned translations: the
            files it matches are paired with the inputs' in sorted order.

    Returns:
        A list of `{"file", "line", "source"[, "target"]}` dicts.

    Raises:
        ValueError: a glob matching nothing, a file that is not UTF-8 text
            (naming it and the line), or targets that do not pair with the
            inputs (naming the files and both counts).
    """
    inputs = _files(input_glob, "--input")
    targets = _files(target_glob, "--target") if target_glob is not None else None
    if targets is not None and len(targets) != len(inputs):
        raise ValueError(
            f"--target matches {len(targets)} files and --input {len(inputs)}; "
            "they pair in sorted order"
        )
    records = []
    for i, path in enumerate(inputs):
        lines = read_lines(path)
        paired = None
        if targets is not None:
            paired = read_lines(targets[i])
            if len(paired) != len(lines):
                raise ValueError(
                    f"{targets[i]} has {len(paired)} lines and {path} {len(lines)}: "
                    "a target file must have a line per input line"
                )
        for number, line in enumerate(lines):
            record = {"file": path, "line": number, "source": line}
            if paired is not None:
                record["target"] = paired[number]
            records.append(record)
    return records


def shard_paths(prefix, shards):
    """`PREFIX-00000-of-00002.jsonl`, ... for `shards` shards."""
    return [f"{prefix}-{i:05d}-of-{shards:05d}.jsonl" for i in range(shards)]


def _shards_of(prefix):
    """The shard files of exactly `prefix` (not of `PREFIX-more`)."""
    digits = "[0-9]" * 5
    return sorted(glob.glob(f"{glob.escape(prefix)}-{digits}-of-{digits}.jsonl"))


class ShardWriter:
    """Writes records to `shards` JSON Lines files, record `i` of the job
    into shard `i % shards`; `close()` renames them into place, `abort()`
    removes them. A context manager: an exception aborts.

    Raises:
        FileExistsError: a shard of that prefix exists (a job never
            overwrites another's output).
    """

    def __init__(self, prefix, shards=1):
        if shards < 1:
            raise ValueError(f"`shards` must be at least 1. Received: {shards}")
        self.paths = shard_paths(prefix, shards)
        taken = _shards_of(prefix)
        if taken:
            raise FileExistsError(f"{taken[0]} exists: give another --output prefix")
        folder = os.path.dirname(os.path.abspath(prefix))
        os.makedirs(folder, exist_ok=True)
        tag = uuid.uuid4().hex[:8]
        self.partial = [f"{p}.partial-{tag}" for p in self.paths]
        self.files = [open(p, "w", encoding="utf-8") for p in self.partial]
        self.count = 0

    def write(self, record):
        line = json.dumps(record, ensure_ascii=False)
        self.files[self.count % len(self.files)].write(line + "\n")
        self.count += 1

    def close(self):
        """Renames the shards into place; returns their paths."""
        for f in self.files:
            f.close()
        for partial, path in zip(self.partial, self.paths):
            os.replace(partial, path)
        return self.paths

    def abort(self):
        for f in self.files:
            f.close()
        for partial in self.partial:
            if os.path.exists(partial):
                os.remove(partial)

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is not None:
            self.abort()
        return False


def read_shards(prefix):
    """Every record of the shards of `prefix`, sorted by file and line."""
    records = []
    for path in _shards_of(prefix):
        with open(path, encoding="utf-8") as f:
            records.extend(json.loads(line) for line in f)
    return sorted(records, key=lambda r: (r["file"], r["line"]))
