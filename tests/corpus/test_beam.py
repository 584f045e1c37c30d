"""The corpus job on Apache Beam's DirectRunner with two worker processes:
the same translations and scores as one process, every line once, both
processes at work."""

import collections
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.corpus.job import run_corpus
from keras_transformer.corpus.options import CorpusOptions
from keras_transformer.corpus.records import read_shards
from keras_transformer.runtime.local import score_with_savedmodel, translate_with_savedmodel
from tests.corpus.test_job import SOURCES, TARGETS

pytest.importorskip("apache_beam")

TWO_PROCESSES = ["--runner", "DirectRunner", "--direct_num_workers", "2",
                 "--direct_running_mode", "multi_processing"]  # fmt: skip
# Enough lines that both worker processes get bundles of them.
LINES = (SOURCES * 12)[:48]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("beam-corpus")
    for i in range(4):
        (root / f"part{i}.en").write_text("\n".join(LINES[i::4]) + "\n", encoding="utf-8")
        (root / f"part{i}.de").write_text(
            "\n".join((TARGETS * 12)[:48][i::4]) + "\n", encoding="utf-8"
        )
    return root


def test_two_worker_processes_translate_as_one_process(export_base, corpus):
    summary = run_corpus(CorpusOptions(
        model=export_base, input=str(corpus / "*.en"), output=str(corpus / "out" / "t"),
        engine="beam", max_batch_size=4, shards=2, beam_args=TWO_PROCESSES,
    ))  # fmt: skip
    assert summary["records"] == len(LINES)
    assert len(summary["rows_by_worker"]) == 2, summary["rows_by_worker"]
    assert sum(summary["rows_by_worker"].values()) == len(LINES)
    records = read_shards(str(corpus / "out" / "t"))
    keys = [(os.path.basename(r["file"]), r["line"]) for r in records]
    assert keys == [(f"part{i}.en", n) for i in range(4) for n in range(12)]
    sources = [r["source"] for r in records]
    assert [r["translation"] for r in records] == translate_with_savedmodel(export_base, sources)


def test_scores_equal_score_on_the_same_pairs(export_base, corpus):
    run_corpus(CorpusOptions(
        model=export_base, task="score", input=str(corpus / "*.en"),
        target=str(corpus / "*.de"), output=str(corpus / "s"), engine="beam",
        max_batch_size=8, beam_args=TWO_PROCESSES,
    ))  # fmt: skip
    records = read_shards(str(corpus / "s"))
    log_probs, lengths = score_with_savedmodel(
        export_base, [r["source"] for r in records], [r["target"] for r in records]
    )
    np.testing.assert_allclose([r["log_prob"] for r in records], log_probs, rtol=1e-5, atol=1e-5)
    assert [r["length"] for r in records] == lengths.tolist()


def test_the_command_line_passes_the_rest_to_beam(export_base, corpus, tmp_path):
    command = [sys.executable, "-m", "keras_transformer.cli", "corpus", "--engine", "beam",
               "--model", export_base, "--input", str(corpus / "part0.en"),
               "--output", str(tmp_path / "cli"), "--runner", "DirectRunner"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_shards(str(tmp_path / "cli"))) == 12


def test_flags_for_beam_without_beam_are_one_clear_error(export_base, corpus, tmp_path):
    command = [sys.executable, "-m", "keras_transformer.cli", "corpus", "--model", export_base,
               "--input", str(corpus / "part0.en"), "--output", str(tmp_path / "x"),
               "--runner", "DirectRunner"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "keras-transformer corpus: error: unrecognized arguments: --runner DirectRunner "
        "(only --engine beam passes flags on, to Beam)"
    )


@pytest.mark.parametrize(
    "flags,message",
    [
        # Beam drops a flag it does not know with a warning: a mistyped flag
        # of corpus's own would have been lost.
        (["--max-batch-sise", "8"], "unrecognized arguments: --max-batch-sise (neither"),
        (["--direct_num_workers=two"], "--direct_num_workers: invalid int value: 'two'"),
        (["--direct_running_mode", "bogus"], "--direct_running_mode: invalid choice: 'bogus'"),
        (["--runner", "Nope"], "Unexpected pipeline runner: Nope."),
    ],
)
def test_flags_beam_would_not_take_are_one_line(export_base, corpus, tmp_path, capsys, flags,
                                                message):  # fmt: skip
    from keras_transformer import cli

    args = ["corpus", "--engine", "beam", "--model", export_base, "--input",
            str(corpus / "part0.en"), "--output", str(tmp_path / "x"), *flags]  # fmt: skip
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("keras-transformer corpus: error:"), err
    assert not any("Traceback" in line or "usage:" in line for line in err), err[:5]
    assert not os.listdir(tmp_path)


class _LengthsSeen:
    """A model that answers each record with its source's length and notes
    the batches it was given."""

    batches = []

    def run(self, records):
        _LengthsSeen.batches.append([len(r["source"]) for r in records])
        return [{**r, "translation": str(len(r["source"]))} for r in records]


@pytest.mark.parametrize("max_batch_size", [1, 3, 8])
def test_batches_are_cut_from_the_bundle_sorted_by_length(monkeypatch, max_batch_size):
    import apache_beam as beam
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.testing.util import assert_that, equal_to

    from keras_transformer.corpus.beam import CorpusTransform, ExportHandler

    monkeypatch.setattr(ExportHandler, "load_model", lambda self: _LengthsSeen())
    _LengthsSeen.batches = []
    lengths = np.random.default_rng(max_batch_size).permutation(np.arange(20) % 7)
    records = [{"file": "f", "line": i, "source": "x" * n} for i, n in enumerate(lengths)]
    with beam.Pipeline(runner=FnApiRunner()) as pipeline:
        results = (
            pipeline
            | beam.Create(records)
            | CorpusTransform("unused", max_batch_size=max_batch_size)
            | beam.Map(lambda r: (r["line"], r["translation"]))
        )
        assert_that(results, equal_to([(r["line"], str(len(r["source"]))) for r in records]))
    # One bundle here: its records in batches of at most `max_batch_size`,
    # cut in order of length, so each pads to the shortest it can.
    assert all(0 < len(batch) <= max_batch_size for batch in _LengthsSeen.batches)
    assert [n for batch in _LengthsSeen.batches for n in batch] == sorted(lengths)


class _CharactersByThread:
    """A model that answers each record with its source's length and
    counts the characters each worker thread was given."""

    characters = collections.Counter()

    def run(self, records):
        import threading

        seen = sum(len(r["source"]) for r in records)
        _CharactersByThread.characters[threading.get_ident()] += seen
        return [{**r, "translation": str(len(r["source"]))} for r in records]


@pytest.mark.parametrize("pattern", ["alternating", "halves"])
def test_two_workers_get_about_half_the_work_each(monkeypatch, pattern):
    # The DirectRunner deals elements to its workers in turn, in the order
    # they come: a corpus whose lines alternate short and long (as
    # Multi30k's do) must not give one worker the long ones.
    from keras_transformer.corpus.beam import ExportHandler, run_beam

    monkeypatch.setattr(ExportHandler, "load_model", lambda self: _CharactersByThread())
    _CharactersByThread.characters = collections.Counter()
    lengths = [5 if (i % 2 if pattern == "alternating" else i < 200) else 60 for i in range(400)]
    records = [{"file": "f", "line": i, "source": "x" * n} for i, n in enumerate(lengths)]
    options = CorpusOptions(
        model="unused", input="unused", output="unused", engine="beam", max_batch_size=8,
        beam_args=["--direct_num_workers", "2", "--direct_running_mode", "multi_threading"],
    )  # fmt: skip

    class Writer(list):
        write = list.append

    written = Writer()
    run_beam(records, options, written)
    assert [r["line"] for r in written] == list(range(400))
    shares = sorted(_CharactersByThread.characters.values())
    assert len(shares) == 2 and sum(shares) == sum(lengths), _CharactersByThread.characters
    assert shares[0] / sum(shares) > 0.45, shares
