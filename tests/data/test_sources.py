import gzip

import pytest

from keras_transformer.data import sources


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
    # Held-out splits never repeat a training sentence.
    train_sources = {
        en
        for en, _ in tfds.as_numpy(
            tfds.load("synthetic_translation", split="train", data_dir=tfds_dir, as_supervised=True)
        )
    }
    assert not any(en in train_sources for en, _ in tfds.as_numpy(test))


def test_synthetic_and_tfds_specs_load_the_same_data(tfds_dir):
    a, stats = sources.load_dataset("synthetic", "validation", tfds_dir)
    b, _ = sources.load_dataset("tfds:synthetic_translation", "validation", tfds_dir)
    assert stats.pairs == 1000
    assert list(a.take(5).as_numpy_iterator()) == list(b.take(5).as_numpy_iterator())


def test_unknown_split(tfds_dir):
    with pytest.raises(ValueError, match="no split 'dev'"):
        sources.load_dataset("synthetic", "dev", tfds_dir)
