import json
import os

import numpy as np
import pytest

from keras_transformer.data import pipeline
from keras_transformer.data.config import DataConfig
from keras_transformer.training.preparation import prepare_data
from keras_transformer.training.run_directory import RunDirectory


def _config(files, **values):
    return DataConfig(
        **{
            "dataset": f"parallel:{files['train.en']},{files['train.de']}",
            "valid": f"parallel:{files['test.en']},{files['test.de']}",
            "vocab_size": 100,
            "max_length": 24,
            **values,
        }
    )


def _batches(dataset, count=6):
    return [[np.asarray(x) for x in (s, t_in, t_out)] for (s, t_in), t_out in dataset.take(count)]


def test_learns_saves_and_then_reuses_the_tokenizers(parallel_files, tmp_path):
    run = RunDirectory(str(tmp_path / "run"))
    lines = []
    first = prepare_data(_config(parallel_files), run, log=lines.append)
    assert any("Learning 100-piece vocabularies" in line for line in lines)
    assert run.has_tokenizers()
    stats = json.loads(open(run.data_stats).read())
    assert stats["corpus"]["pairs"] == 1000 == first.corpus_stats.pairs
    assert stats["length"]["pairs"] == 1000
    assert stats["source_vocab_size"] == first.source_tokenizer.vocab_size

    lines.clear()
    again = prepare_data(_config(parallel_files), run, log=lines.append)
    assert any("Reusing the tokenizers" in line for line in lines)
    assert again.source_tokenizer.pieces() == first.source_tokenizer.pieces()
    assert again.target_tokenizer.pieces() == first.target_tokenizer.pieces()


def test_a_worker_that_does_not_save_writes_nothing(parallel_files, tmp_path):
    run = RunDirectory(str(tmp_path / "run"))
    prepare_data(_config(parallel_files), run, log=lambda line: None, save=False)
    assert not os.path.exists(run.path)


def test_batches_are_the_pipelines_own(parallel_files, tmp_path):
    """`train_batches` and `valid_batches` equal `pipeline.make_batches` on
    the same pairs, tokenizers and seed: one preparation, no second recipe."""
    config = _config(parallel_files, length_policy="truncate")
    data = prepare_data(config, RunDirectory(str(tmp_path)), log=lambda line: None)
    common = dict(batch_tokens=256, max_length=24, policy="truncate")
    tokenizers = (data.source_tokenizer, data.target_tokenizer)
    expected = pipeline.make_batches(data.train_pairs, *tokenizers, seed=3, **common)
    for got, want in zip(_batches(data.train_batches(256, seed=3)), _batches(expected)):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    expected = pipeline.make_batches(data.valid_pairs, *tokenizers, shuffle=False, **common)
    got = _batches(data.valid_batches(256), 100)
    want = _batches(expected, 100)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("batch_tokens", [64, 200])
def test_train_batches_keep_the_token_budget_and_length(parallel_files, tmp_path, batch_tokens):
    data = prepare_data(_config(parallel_files), RunDirectory(str(tmp_path)), log=lambda x: None)
    for context, target_in, target_out in _batches(data.train_batches(batch_tokens), 20):
        longest = max(context.shape[1], target_in.shape[1])
        assert context.shape[0] * longest <= batch_tokens
        assert longest <= 24
        # Teacher forcing: the decoder's input is its label shifted right.
        shifted = target_in[:, 1:] != 0
        np.testing.assert_array_equal(target_in[:, 1:][shifted], target_out[:, :-1][shifted])


def test_no_validation_data(parallel_files, tmp_path):
    config = DataConfig(
        dataset=f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}",
        vocab_size=100,
    )
    data = prepare_data(config, RunDirectory(str(tmp_path)), log=lambda line: None)
    assert data.valid_pairs is None and data.valid_batches(512) is None


def test_joint_vocabulary_is_one_tokenizer_on_both_sides(parallel_files, tmp_path):
    run = RunDirectory(str(tmp_path))
    data = prepare_data(_config(parallel_files, joint_vocabulary=True), run, log=lambda x: None)
    assert data.source_tokenizer is data.target_tokenizer
    with open(run.source_tokenizer, "rb") as a, open(run.target_tokenizer, "rb") as b:
        assert a.read() == b.read()


@pytest.mark.parametrize("policy", ["filter", "truncate"])
def test_length_policy_reaches_the_examples(parallel_files, tmp_path, policy):
    config = _config(parallel_files, length_policy=policy, max_length=12)
    data = prepare_data(config, RunDirectory(str(tmp_path)), log=lambda line: None)
    assert 0 < data.length_stats.too_long < 1000
    # Framed: the source with its end token, the target's input with its start.
    lengths = [max(len(s), len(t_in)) for s, t_in, _ in data.train_examples().as_numpy_iterator()]
    assert max(lengths) <= 12
    assert len(lengths) == 1000 - (data.length_stats.too_long if policy == "filter" else 0)
