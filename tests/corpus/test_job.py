"""`run_corpus` on this process: what `translate` and `score` give, line by line."""

import numpy as np
import pytest

from keras_transformer import cli
from keras_transformer.corpus.job import run_corpus
from keras_transformer.corpus.options import CorpusOptions
from keras_transformer.corpus.records import read_shards
from keras_transformer.runtime.local import score_with_savedmodel, translate_with_savedmodel

SOURCES = ["The dog sleeps.", "", "A tired teacher gives the red book to the children.",
           "Ünïcödé ☃ text.", "The cat sees the bird in the garden."]  # fmt: skip
TARGETS = ["Der Hund schläft.", "", "Ein Lehrer gibt das Buch.", "Text.", "Die Katze sieht."]


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "a.en").write_text("\n".join(SOURCES[:3]) + "\n", encoding="utf-8")
    (tmp_path / "b.en").write_text("\n".join(SOURCES[3:]) + "\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("\n".join(TARGETS[:3]) + "\n", encoding="utf-8")
    (tmp_path / "b.de").write_text("\n".join(TARGETS[3:]) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("max_batch_size,shards", [(2, 3), (64, 1)])
def test_translations_equal_translate_on_the_same_lines(export_base, corpus, max_batch_size,
                                                         shards):  # fmt: skip
    summary = run_corpus(CorpusOptions(
        model=export_base, input=str(corpus / "*.en"), output=str(corpus / "out" / "t"),
        max_batch_size=max_batch_size, shards=shards,
    ))  # fmt: skip
    assert summary["records"] == len(SOURCES) and len(summary["shards"]) == shards
    records = read_shards(str(corpus / "out" / "t"))
    assert [(r["file"].rsplit("/", 1)[1], r["line"]) for r in records] == [
        ("a.en", 0), ("a.en", 1), ("a.en", 2), ("b.en", 0), ("b.en", 1),
    ]  # fmt: skip
    assert [r["source"] for r in records] == SOURCES
    assert [r["translation"] for r in records] == translate_with_savedmodel(export_base, SOURCES)


def test_nbest_lists_equal_the_exports_on_the_same_lines(export_base, corpus):
    run_corpus(CorpusOptions(model=export_base, task="nbest", input=str(corpus / "*.en"),
                             output=str(corpus / "n"), max_batch_size=2))  # fmt: skip
    records = read_shards(str(corpus / "n"))
    expected = translate_with_savedmodel(export_base, SOURCES, signature="translate_nbest")
    assert [" ||| ".join(r["translations"]) for r in records] == expected
    assert all(len(r["scores"]) == len(r["translations"]) for r in records)


def test_scores_equal_score_on_the_same_pairs(export_base, corpus):
    run_corpus(CorpusOptions(model=export_base, task="score", input=str(corpus / "*.en"),
                             target=str(corpus / "*.de"), output=str(corpus / "s"),
                             max_batch_size=3))  # fmt: skip
    records = read_shards(str(corpus / "s"))
    log_probs, lengths = score_with_savedmodel(export_base, SOURCES, TARGETS)
    assert [r["target"] for r in records] == TARGETS
    np.testing.assert_allclose([r["log_prob"] for r in records], log_probs, rtol=1e-5, atol=1e-5)
    assert [r["length"] for r in records] == lengths.tolist()


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--input", "NOWHERE/*.en"], "--input 'NOWHERE/*.en' matches no file"),
        (["--task", "score"], "--target goes with --task score"),
        (["--signature", "translate_poems"], "has no signature 'translate_poems'"),
        (["--engine", "local", "--ray-address", "127.0.0.2:1"], "--ray-address goes with"),
        (["--workers", "0"], "`workers` must be a positive int"),
        # ray.init would retry an address where nothing listens for minutes.
        (
            ["--engine", "ray", "--ray-address", "127.0.0.2:1"],
            "--ray-address 127.0.0.2:1: nothing answers there (Connection refused)",
        ),
        (["--engine", "ray", "--ray-address", "127.0.0.2:99999"], "a port is at most 65535"),
        (["--output", "{corpus}/a.en/out"], "out' cannot be written: {corpus}/a.en is a file"),
        (["--output", "{corpus}/a.en/deeper/out"], "cannot be written: {corpus}/a.en is a file"),
    ],
)
def test_a_bad_job_is_one_line(export_base, corpus, capsys, flags, message):
    args = ["corpus", "--model", export_base, "--input", str(corpus / "*.en"),
            "--output", str(corpus / "bad"), *(f.format(corpus=corpus) for f in flags)]  # fmt: skip
    assert cli.main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert message.format(corpus=corpus) in error[-1]
    assert error[-1].startswith("keras-transformer corpus: error:")
    assert not any("Traceback" in line for line in error)
    assert not list(corpus.glob("bad*"))  # nothing written


def test_a_corpus_of_blank_lines_keeps_them_and_one_without_lines_is_refused(export_base, tmp_path):
    (tmp_path / "blank.en").write_text("\n\n\n", encoding="utf-8")
    run_corpus(CorpusOptions(model=export_base, input=str(tmp_path / "blank.en"),
                             output=str(tmp_path / "out")))  # fmt: skip
    records = read_shards(str(tmp_path / "out"))
    assert [(r["line"], r["source"], r["translation"]) for r in records] == [
        (0, "", ""), (1, "", ""), (2, "", "")
    ]  # fmt: skip
    (tmp_path / "empty.en").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no line: every file it matches is empty"):
        run_corpus(CorpusOptions(model=export_base, input=str(tmp_path / "empty.en"),
                                 output=str(tmp_path / "none")))  # fmt: skip
    assert not list(tmp_path.glob("none*"))


def test_the_local_engine_reads_the_corpus_as_it_goes(export_base, tmp_path, monkeypatch):
    from keras_transformer.corpus import job

    lines = [f"{s} ({i})" if s else "" for i in range(4) for s in SOURCES]  # 20 lines
    (tmp_path / "in.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(job, "WINDOW", 2)  # windows of 6 lines: 4 of them
    monkeypatch.setattr(job, "read_records", None)  # never the whole corpus at once
    run_corpus(CorpusOptions(model=export_base, input=str(tmp_path / "in.en"),
                             output=str(tmp_path / "out"), max_batch_size=3, shards=2))  # fmt: skip
    records = read_shards(str(tmp_path / "out"))
    assert [r["line"] for r in records] == list(range(len(lines)))
    assert [r["translation"] for r in records] == translate_with_savedmodel(export_base, lines)


def test_a_bad_line_anywhere_fails_the_job_before_any_work(tmp_path, monkeypatch):
    from keras_transformer.corpus import job

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(job, "CorpusModel", loaded)
    (tmp_path / "a.en").write_text("fine\n" * 50, encoding="utf-8")
    (tmp_path / "b.en").write_bytes(b"fine\n" * 50 + b"Gr\xfc\xdfe\n")
    with pytest.raises(ValueError, match=r"b\.en: line 51 is not UTF-8"):
        run_corpus(CorpusOptions(model="unused", input=str(tmp_path / "*.en"),
                                 output=str(tmp_path / "out")))  # fmt: skip
    assert not list(tmp_path.glob("out*"))
