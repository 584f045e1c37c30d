import gzip

import pytest

from keras_transformer.data import sources
from keras_transformer.data.sources import CorpusError, read_parallel_files
from tests.processes import run_python


def _write(path, lines, gz=False):
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_parallel_files_drop_and_count_empty_lines(tmp_path, gz):
    suffix = ".gz" if gz else ""
    src = _write(tmp_path / f"a.en{suffix}", ["Hello .", "", "Good night", "x"], gz)
    tgt = _write(tmp_path / f"a.de{suffix}", ["Hallo .", "leer", "Gute Nacht", "  "], gz)
    dataset, stats = sources.load_dataset(f"parallel:{src},{tgt}")
    assert stats.pairs == 2 and stats.empty_dropped == 2
    pairs = [(a.decode(), b.decode()) for a, b in dataset.as_numpy_iterator()]
    assert pairs == [("Hello .", "Hallo ."), ("Good night", "Gute Nacht")]


def test_mismatched_line_counts_name_both_files(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "two", "three"])
    tgt = _write(tmp_path / "a.de", ["eins", "zwei"])
    with pytest.raises(ValueError, match=r"a\.en has 3.*a\.de has 2"):
        sources.load_dataset(f"parallel:{src},{tgt}")


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_lines_end_at_newlines_only_and_stream(tmp_path, ending):
    # Unicode's other line boundaries stay in their sentence: a parallel
    # corpus keeps its alignment whatever a sentence holds.
    lines = ["one\u2028two", "form\x0cfeed", "", "next\x85line", "last"]
    path = tmp_path / "a.en"
    path.write_bytes(ending.join(lines).encode("utf-8"))
    assert sources.read_lines(str(path)) == lines
    read = sources.iter_lines(str(path))
    assert next(read) == lines[0]  # a generator: the rest is not read yet
    assert list(read) == lines[1:]


@pytest.mark.parametrize("gz", [False, True])
def test_a_byte_order_mark_is_no_part_of_the_first_sentence(tmp_path, gz):
    import gzip

    lines = ["Der Hund.", "\ufeffstays inside", "Ende"]
    path = tmp_path / ("a.de.gz" if gz else "a.de")
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write("\ufeff".encode("utf-8") + "\r\n".join(lines).encode("utf-8"))
    assert sources.read_lines(str(path)) == lines


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.en"):
        sources.read_parallel_files(str(tmp_path / "nope.en"), str(tmp_path / "nope.de"))


@pytest.mark.parametrize("spec", ["parallel:only_one", "tfds:", "wmt", "parallel:a,b,c"])
def test_bad_specs(spec):
    with pytest.raises(ValueError, match="parallel|tfds|Unknown"):
        sources.parse_spec(spec)


def test_specs():
    assert sources.parse_spec("synthetic") == ("synthetic", None)
    assert sources.parse_spec("tfds:ted_hrlr_translate/pt_to_en") == (
        "tfds",
        "ted_hrlr_translate/pt_to_en",
    )
    assert sources.parse_spec("parallel:a.en,a.de") == ("parallel", ("a.en", "a.de"))


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def test_synthetic_builder_loads_with_tfds(tfds_dir):
    import tensorflow_datasets as tfds

    from keras_transformer.data import synthetic_builder  # noqa: F401

    test = tfds.load("synthetic_translation", split="test", data_dir=tfds_dir, as_supervised=True)
    pairs = list(test.take(3).as_numpy_iterator())
    assert len(pairs) == 3 and all(en and de for en, de in pairs)
    info = tfds.builder("synthetic_translation", data_dir=tfds_dir).info
    assert {s: info.splits[s].num_examples for s in ("train", "validation", "test")} == {
        "train": 60000,
        "validation": 1000,
        "test": 1000,
    }
    # Held-out splits never repeat a training sentence. (In batches: one
    # Python step per sentence of 60,000 took half a minute.)
    train = tfds.load("synthetic_translation", split="train", data_dir=tfds_dir, as_supervised=True)
    train_sources = set()
    for batch in train.map(lambda en, de: en).batch(8192).as_numpy_iterator():
        train_sources.update(batch.tolist())
    assert len(train_sources) > 1000
    assert not any(en in train_sources for en, _ in tfds.as_numpy(test))


def test_synthetic_and_tfds_specs_load_the_same_data(tfds_dir):
    a, stats = sources.load_dataset("synthetic", "validation", tfds_dir)
    b, _ = sources.load_dataset("tfds:synthetic_translation", "validation", tfds_dir)
    assert stats.pairs == 1000
    assert list(a.take(5).as_numpy_iterator()) == list(b.take(5).as_numpy_iterator())


def test_unknown_split(tfds_dir):
    with pytest.raises(ValueError, match="no split 'dev'"):
        sources.load_dataset("synthetic", "dev", tfds_dir)


def _corpus_cases(tmp_path):
    good = tmp_path / "good.de"
    good.write_text("Guten Tag\nHallo\n", encoding="utf-8")
    whole = gzip.compress(b"Hello\nGood day\n" * 50)
    truncated = tmp_path / "truncated.en.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    corrupt = tmp_path / "corrupt.en.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate" * 4)
    latin1 = tmp_path / "latin1.en"
    latin1.write_bytes("fine\nstill fine\nGr\xfc\xdfe\n".encode("latin-1"))
    empty = tmp_path / "empty.en"
    empty.write_text("\n\n", encoding="utf-8")
    directory = tmp_path / "folder.en"
    directory.mkdir()
    return good, {
        "missing": (tmp_path / "nope.en", "corpus file not found"),
        "directory": (directory, "is a directory"),
        "truncated": (truncated, "truncated"),
        "corrupt": (corrupt, "not a valid gzip file"),
        "latin1": (latin1, "line 3 is not UTF-8"),
        "empty": (empty, "the file is empty"),
    }


@pytest.mark.parametrize(
    "case", ["missing", "directory", "truncated", "corrupt", "latin1", "empty"]
)
def test_bad_corpus_files_are_named(tmp_path, case):
    good, cases = _corpus_cases(tmp_path)
    path, what = cases[case]
    with pytest.raises(CorpusError) as caught:
        read_parallel_files(str(path), str(good))
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and what in message
    assert "\n" not in message


@pytest.mark.parametrize("case", ["truncated", "latin1", "directory"])
def test_train_reports_a_bad_corpus_in_one_line(tmp_path, case):
    good, cases = _corpus_cases(tmp_path)
    path, what = cases[case]
    result = run_python(
        "-m", "keras_transformer.cli", "train", "--dataset", f"parallel:{path},{good}",
        "--output-dir", str(tmp_path / "run"), "--epochs", "1",
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("keras-transformer train: error: ") and str(path) in last and what in last
    )


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_stream_reads_as_a_file_does(tmp_path, ending):
    import io

    lines = ["\ufeffone\u2028two", "", "next\x85line", "last"]
    data = ending.join(lines).encode("utf-8")
    path = tmp_path / "a.en"
    path.write_bytes(data)
    assert sources.read_stream_lines(io.BytesIO(data)) == sources.read_lines(str(path))
    assert sources.read_stream_lines(io.BytesIO(data))[0] == "one\u2028two"


def test_a_stream_names_its_line_that_is_not_utf8():
    import io

    stream = io.BytesIO("fine\nGr\xfc\xdfe\n".encode("latin-1"))
    expected = r"^stdin: line 2 is not UTF-8 \(byte 0xfc at offset 7\)$"
    with pytest.raises(CorpusError, match=expected):
        sources.read_stream_lines(stream, name="stdin")


def test_aligned_lines_keep_blank_pairs_and_name_uneven_files(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "", "three"])
    tgt = _write(tmp_path / "a.de", ["eins", "zwei", ""])
    assert sources.read_aligned_lines(src, tgt) == (["one", "", "three"], ["eins", "zwei", ""])
    short = _write(tmp_path / "b.de", ["eins"])
    with pytest.raises(ValueError, match=r"a\.en has 3, .*b\.de has 1$"):
        sources.read_aligned_lines(src, short)


def test_a_tfds_name_that_is_no_dataset_is_one_line(tmp_path):
    with pytest.raises(CorpusError) as caught:
        sources.load_dataset("tfds:no_such_dataset_xyz", data_dir=str(tmp_path))
    assert str(caught.value) == (
        "tfds:no_such_dataset_xyz: TensorFlow Datasets has no dataset of that name "
        "(`tfds.list_builders()` lists them)"
    )


def test_a_tfds_download_that_fails_is_one_line(tmp_path, monkeypatch):
    import requests
    import tensorflow_datasets as tfds

    class Offline:
        data_dir = str(tmp_path / "ted")

        def download_and_prepare(self):
            raise requests.exceptions.ConnectionError(
                "HTTPConnection(host='www.phontron.com', port=80): Max retries exceeded\n"
                "  (Caused by NameResolutionError)"
            )

    monkeypatch.setattr(tfds, "builder", lambda name, data_dir=None: Offline())
    with pytest.raises(CorpusError) as caught:
        sources.load_dataset("tfds:ted_hrlr_translate/pt_to_en", data_dir=str(tmp_path))
    message = str(caught.value)
    assert message.startswith(
        f"tfds:ted_hrlr_translate/pt_to_en: cannot be downloaded and prepared in {tmp_path}"
    )
    assert "Max retries exceeded (Caused by NameResolutionError)" in message
    assert "\n" not in message
