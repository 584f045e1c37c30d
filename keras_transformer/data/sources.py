"""Where parallel text comes from: `synthetic`, `parallel:SRC,TGT`, `tfds:NAME`.

Every source becomes a `tf.data.Dataset` of `(source, target)` string
scalars.
"""

import dataclasses
import gzip
import os
import zlib

import tensorflow as tf

from keras_transformer._extras import require
from keras_transformer.data.specs import SYNTHETIC, default_validation_spec, parse_spec

__all__ = [
    "SYNTHETIC",
    "CorpusError",
    "CorpusNotFoundError",
    "CorpusStats",
    "default_validation_spec",
    "iter_lines",
    "load_dataset",
    "parse_spec",
    "read_aligned_lines",
    "read_lines",
    "read_parallel_files",
    "read_stream_lines",
    "sentences",
]


@dataclasses.dataclass
class CorpusStats:
    """What loading a corpus kept and dropped."""

    pairs: int = 0
    empty_dropped: int = 0


class CorpusError(ValueError):
    """A corpus file cannot be read as text; the message names the file."""


class CorpusNotFoundError(CorpusError, FileNotFoundError):
    """A corpus file does not exist."""


def iter_lines(path, empty_ok=False):
    """The lines of a plain or gzipped (`.gz`) UTF-8 text file, one at a
    time: a file of any size is read in constant memory.

    A line ends at `"\n"` only (a `"\r"` before it, of Windows files, is
    dropped), so that line `i` is what `sed -n` and `wc -l` count as line
    `i + 1`, and a line separator inside a sentence (U+2028, a form feed,
    which `str.splitlines` would split at) stays in its sentence: a line
    and its line-aligned translation keep the same number. A byte order
    mark at the start of the file is dropped.

    Args:
        path: the file.
        empty_ok: a file without a line, or of blank lines only, is read
            as it is (a corpus to translate keeps its blank lines as
            records); by default it is refused, as a corpus to train on.

    Raises:
        CorpusError: one line naming the file and what is wrong with it:
            missing, a directory, unreadable, a truncated or corrupt gzip,
            text that is not UTF-8 (with the line), or empty. Raised when
            the iteration reaches it: after the lines before it.
    """
    if not os.path.exists(path):
        raise CorpusNotFoundError(f"{path}: corpus file not found")
    if os.path.isdir(path):
        raise CorpusError(f"{path}: is a directory, not a corpus file")
    opener = gzip.open if path.endswith(".gz") else open
    lines = _Decoded(path)
    try:
        with opener(path, "rb") as f:
            yield from lines.of(f)
    except EOFError:
        raise CorpusError(f"{path}: the gzip file is truncated") from None
    except (gzip.BadGzipFile, zlib.error) as error:
        raise CorpusError(f"{path}: not a valid gzip file ({error})") from None
    except OSError as error:
        raise CorpusError(f"{path}: cannot be read ({error.strerror or error})") from None
    if lines.blank and not empty_ok:
        raise CorpusError(f"{path}: the file is empty")


class _Decoded:
    """Lines of a binary stream as `iter_lines` gives them, with errors
    naming `name`; `blank` says, once read, whether every line was blank."""

    def __init__(self, name):
        self.name, self.blank = name, True

    def of(self, stream):
        offset = 0
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusError(
                    f"{self.name}: line {number} is not UTF-8 (byte {raw[error.start]:#04x} "
                    f"at offset {offset + error.start})"
                ) from None
            if number == 1:
                # Windows editors start UTF-8 files with a byte order
                # mark; it is no part of the first sentence.
                line = line.removeprefix("\ufeff")
            offset += len(raw)
            line = line.removesuffix("\n").removesuffix("\r")
            self.blank = self.blank and not line.strip()
            yield line


def read_stream_lines(stream, name="standard input"):
    """The lines of a binary stream (`sys.stdin.buffer`), as `iter_lines`
    reads a file's: UTF-8, ending at `"\n"`, blank lines kept.

    Raises:
        CorpusError: a line is not UTF-8; the message names `name`, the
            line and the byte.
    """
    return list(_Decoded(name).of(stream))


def read_lines(path):
    """The lines of a plain or gzipped (`.gz`) UTF-8 text file, as a list
    (`iter_lines`: lines end at `"\n"`).

    Raises:
        CorpusError: one line naming the file and what is wrong with it
            (see `iter_lines`).
    """
    return list(iter_lines(path))


def read_aligned_lines(source_path, target_path):
    """The lines of two line-aligned text files (`read_lines`), every
    line kept, blank ones too (`score` scores each pair).

    Returns:
        `(sources, targets)`: two lists of str of one length.

    Raises:
        CorpusError: a file cannot be read (see `read_lines`).
        ValueError: the files have different numbers of lines; the
            message names both files and their counts.
    """
    sources = read_lines(source_path)
    targets = read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            "Parallel files must have the same number of lines: "
            f"{source_path} has {len(sources)}, {target_path} has {len(targets)}"
        )
    return sources, targets


def read_parallel_files(source_path, target_path):
    """Reads a pair of aligned text files, one sentence per line.

    Plain or gzipped (`.gz`) UTF-8. Pairs where either side is empty are
    dropped and counted.

    Args:
        source_path: source-language file.
        target_path: target-language file, line-aligned with the source.

    Returns:
        `(sources, targets, stats)`: two lists of str and a `CorpusStats`.

    Raises:
        CorpusError: a file cannot be read (see `read_lines`).
        ValueError: the files have different numbers of lines.
    """
    sources, targets = read_aligned_lines(source_path, target_path)
    stats = CorpusStats()
    kept_sources, kept_targets = [], []
    for src, tgt in zip(sources, targets):
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            stats.empty_dropped += 1
            continue
        kept_sources.append(src)
        kept_targets.append(tgt)
    stats.pairs = len(kept_sources)
    return kept_sources, kept_targets, stats


def _load_tfds(name, split, data_dir):
    tfds = require("tensorflow_datasets")

    if name == "synthetic_translation":
        from keras_transformer.data import synthetic_builder  # noqa: F401  (registers it)
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        # TFDS's own message runs to a dozen lines of advice.
        raise CorpusError(
            f"tfds:{name}: TensorFlow Datasets has no dataset of that name "
            "(`tfds.list_builders()` lists them)"
        ) from None
    try:
        builder.download_and_prepare()
    except OSError as error:  # no network, a full disk; requests' errors are OSErrors
        raise CorpusError(
            f"tfds:{name}: cannot be downloaded and prepared in {builder.data_dir}: "
            f"{' '.join(str(error).split())}"
        ) from None
    if split not in builder.info.splits:
        raise ValueError(
            f"Dataset {name!r} has no split {split!r}; it has {sorted(builder.info.splits)}"
        )
    dataset = builder.as_dataset(split=split, as_supervised=True)
    return dataset, CorpusStats(pairs=builder.info.splits[split].num_examples)


def load_dataset(spec, split="train", data_dir=None):
    """Loads parallel text as a dataset of `(source, target)` strings.

    Args:
        spec: `"synthetic"`, `"parallel:SRC_FILE,TGT_FILE"` or `"tfds:NAME"`
            (any TFDS translation dataset with supervised keys, e.g.
            `tfds:ted_hrlr_translate/pt_to_en`).
        split: `"train"`, `"validation"` or `"test"`; ignored for parallel
            files, which are a split of their own.
        data_dir: TFDS data directory.

    Returns:
        `(dataset, stats)`.

    Example:

    >>> dataset, stats = load_dataset("synthetic", "validation", data_dir)
    >>> stats.pairs
    1000
    """
    kind, argument = parse_spec(spec)
    if kind == SYNTHETIC:
        return _load_tfds("synthetic_translation", split, data_dir)
    if kind == "tfds":
        return _load_tfds(argument, split, data_dir)
    sources, targets, stats = read_parallel_files(*argument)
    return tf.data.Dataset.from_tensor_slices((sources, targets)), stats


def sentences(dataset, limit=None):
    """Python lists `(sources, targets)` of the first `limit` pairs."""
    if limit is not None:
        dataset = dataset.take(limit)
    sources, targets = [], []
    for src, tgt in dataset.batch(4096).as_numpy_iterator():
        sources += [s.decode("utf-8") for s in src]
        targets += [t.decode("utf-8") for t in tgt]
    return sources, targets
