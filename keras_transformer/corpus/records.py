"""A corpus as keyed records in, JSON Lines shards out.

Every input line is one record, keyed by its file and its 0-based line
number, so that whatever order an engine answers in, the corpus is
reassembled by key; an empty line is a record too. Shards are written
under a temporary name and renamed once whole: a job that dies leaves no
partial shard.
"""

import glob
import itertools
import json
import os
import uuid

from keras_transformer.corpus.options import check_shards
from keras_transformer.data.sources import iter_lines


def _files(pattern, flag):
    # `**` reaches into subfolders (`mono/**/*.en`), as in Beam's and
    # Ray's file patterns; a folder the pattern matches is no input.
    files = sorted(f for f in glob.glob(pattern, recursive=True) if not os.path.isdir(f))
    if not files:
        raise ValueError(f"{flag} {pattern!r} matches no file")
    return files


def _count(n, noun):
    return f"{n} {noun}{'' if n == 1 else 's'}"


# What `zip_longest` gives for the file that ended first.
_MISSING = object()


def _paired_files(input_glob, target_glob, flag):
    inputs = _files(input_glob, "--input")
    targets = _files(target_glob, flag) if target_glob is not None else None
    if targets is not None and len(targets) != len(inputs):
        raise ValueError(
            f"{flag} matches {_count(len(targets), 'file')} and --input {len(inputs)}; "
            "they pair in sorted order"
        )
    return inputs, targets


def iter_records(input_glob, target_glob=None, key="target"):
    """The records of the files `input_glob` matches, in order, one at a
    time: a corpus of any size is read in constant memory.

    Args:
        input_glob: source files, one sentence a line (plain or `.gz`,
            UTF-8; a line ends at `"\n"`, see `data.sources.iter_lines`).
            A blank line is a record; an empty file has none.
        target_glob: line-aligned files of a second column (translations
            to score, target prefixes to continue): the files it matches
            are paired with the inputs' in sorted order.
        key: the records' name of that column, `"target"` or
            `"target_prefix"` (its flag, `--target` or `--target-prefix`,
            names it in errors).

    Yields:
        `{"file", "line", "source"[, key]}` dicts.

    Raises:
        ValueError: a glob matching nothing, a file that is not UTF-8 text
            (naming it and the line), or targets that do not pair with the
            inputs (naming the files and both counts), when the iteration
            reaches it (`count_records` checks a corpus whole first).
    """
    flag = "--" + key.replace("_", "-")
    inputs, targets = _paired_files(input_glob, target_glob, flag)
    for i, path in enumerate(inputs):
        if targets is None:
            for number, line in enumerate(iter_lines(path, empty_ok=True)):
                yield {"file": path, "line": number, "source": line}
            continue
        sources, paired = iter_lines(path, empty_ok=True), iter_lines(targets[i], empty_ok=True)
        for number, (line, target) in enumerate(
            itertools.zip_longest(sources, paired, fillvalue=_MISSING)
        ):
            if line is _MISSING or target is _MISSING:
                # One file ended at `number`; the other's count is its rest.
                longer = number + 1 + sum(1 for _ in (paired if line is _MISSING else sources))
                counts = (number, longer) if line is _MISSING else (longer, number)
                raise ValueError(
                    f"{targets[i]} has {_count(counts[1], 'line')} and {path} {counts[0]}: "
                    f"a {flag} file must have a line per input line"
                )
            yield {"file": path, "line": number, "source": line, key: target}


def count_records(input_glob, target_glob=None, key="target"):
    """The number of records of the corpus, read whole once in constant
    memory: every error `iter_records` would raise is raised here, before
    any work on the corpus."""
    return sum(1 for _ in iter_records(input_glob, target_glob, key))


def read_records(input_glob, target_glob=None, key="target"):
    """The records of `iter_records`, as a list.

    Returns:
        A list of `{"file", "line", "source"[, "target"]}` dicts.

    Raises:
        ValueError: as `iter_records`.
    """
    return list(iter_records(input_glob, target_glob, key))


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
        OSError: the process may not hold `shards` files open at once,
            even with its soft limit raised to the hard one.
    """

    def __init__(self, prefix, shards=1):
        check_shards(shards)
        self.paths = shard_paths(prefix, shards)
        taken = _shards_of(prefix)
        if taken:
            raise FileExistsError(f"{taken[0]} exists: give another --output prefix")
        tag = uuid.uuid4().hex[:8]
        self.partial = [f"{p}.partial-{tag}" for p in self.paths]
        self.files = []
        folder = os.path.dirname(os.path.abspath(prefix))
        _allow_open_files(shards)
        try:
            os.makedirs(folder, exist_ok=True)
            for path in self.partial:
                self.files.append(open(path, "w", encoding="utf-8"))
        except OSError as error:
            self.abort()
            why = f"{error.strerror or error}" + (f" ({error.filename})" if error.filename else "")
            # makedirs says "File exists" or "Not a directory" of a file on the way.
            on_the_way = _existing_ancestor(folder)
            if not os.path.isdir(on_the_way):
                why = f"{on_the_way} is a file, not a folder"
            raise OSError(f"--output {prefix!r} cannot be written: {why}") from None
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


def _allow_open_files(count):
    """Lets the process hold `count` more files open, raising its soft
    limit up to the hard one as needed (`ulimit -n` is often 1,024); an
    `OSError` naming the limit where that is not enough."""
    try:
        import resource
    except ImportError:  # not POSIX: no such limit to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        held = len(os.listdir("/proc/self/fd"))
    except OSError:
        held = 256
    need = held + count + 16
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard == resource.RLIM_INFINITY or hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        return
    raise OSError(
        f"--shards {count} needs {count} files open at once, and this process may "
        f"open {hard} in all (ulimit -Hn): give fewer shards"
    )


def _existing_ancestor(path):
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def read_shards(prefix):
    """Every record of the shards of `prefix`, sorted by file and line."""
    records = []
    for path in _shards_of(prefix):
        with open(path, encoding="utf-8") as f:
            records.extend(json.loads(line) for line in f)
    return sorted(records, key=lambda r: (r["file"], r["line"]))
