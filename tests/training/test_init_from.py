"""Fine-tuning: `train --init-from RUN` continues an imported (or trained)
run on new parallel data, and the result exports and translates."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.interop.marian import import_marian
from keras_transformer.training import TrainConfig
from keras_transformer.training.run_directory import RunDirectory, load_run, read_generation
from keras_transformer.training.trainer import train
from tests.interop import marian_checkpoints as checkpoints

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def imported_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    folder = checkpoints.build_checkpoint(str(root / "opus-mt"))
    return import_marian(folder, str(root / "imported"))["run"]


@pytest.fixture(scope="module")
def in_domain(tmp_path_factory):
    root = tmp_path_factory.mktemp("in-domain")
    pairs = list(zip(checkpoints.SOURCE_TEXT[:6], checkpoints.TARGET_TEXT[:6])) * 20
    for name, side in (("train.en", 0), ("train.de", 1)):
        (root / name).write_text("\n".join(p[side] for p in pairs) + "\n", encoding="utf-8")
    return f"parallel:{root / 'train.en'},{root / 'train.de'}"


def _loss(run_path, dataset):
    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy

    model, source, target, _ = load_run(run_path)
    src_path, tgt_path = dataset.removeprefix("parallel:").split(",")
    sources = open(src_path, encoding="utf-8").read().splitlines()[:6]
    targets = open(tgt_path, encoding="utf-8").read().splitlines()[:6]
    src = source.tokenize(tf.constant(sources))
    src = tf.concat([src, tf.fill([src.nrows(), 1], 3)], axis=1).to_tensor()
    tgt = target.tokenize(tf.constant(targets))
    labels = tf.concat([tgt, tf.fill([tgt.nrows(), 1], 3)], axis=1).to_tensor()
    inputs = tf.concat([tf.fill([tgt.nrows(), 1], 2), tgt], axis=1).to_tensor()
    logits = model((src, inputs), training=False)
    return float(MaskedSparseCategoricalCrossentropy()(labels, logits))


def test_fine_tuning_lowers_the_in_domain_loss_and_exports(imported_run, in_domain, tmp_path):
    run = str(tmp_path / "tuned")
    config = TrainConfig(
        dataset=in_domain, output_dir=run, init_from=imported_run, epochs=2,
        steps_per_epoch=8, batch_tokens=512, max_length=64, warmup_steps=4,
        peak_learning_rate=2e-3, freeze=["source_embedding"], verbose=0,
        model_overrides={"dropout": 0.0},
    )  # fmt: skip
    before = _loss(imported_run, in_domain)
    model, _ = train(config, log=lambda line: None)
    after = _loss(run, in_domain)
    assert after < 0.8 * before, (before, after)
    # The frozen embedding did not move; the decoder did.
    start, *_ = load_run(imported_run)
    np.testing.assert_array_equal(
        start.source_embedding.embeddings.numpy(), model.source_embedding.embeddings.numpy()
    )
    assert not np.allclose(
        start.decoder.blocks[0].feed_forward_norm.gamma.numpy(),
        model.decoder.blocks[0].feed_forward_norm.gamma.numpy(),
    )
    # Same tokenizers and generation settings as the imported run.
    assert read_generation(run) == read_generation(imported_run)
    for name in ("source.model", "source.pieces.json", "target.pieces.json"):
        assert os.path.exists(os.path.join(RunDirectory(run).path, "tokenizers", name))
    from keras_transformer.export import export_run

    version = export_run(run, str(tmp_path / "export"), max_output_length=16)
    loaded = tf.saved_model.load(version)
    out = loaded.signatures["serving_default"](text=tf.constant([checkpoints.SOURCE_TEXT[0]]))
    assert out["translation"].shape == (1,)
    info = json.load(open(os.path.join(run, "model_config.json")))
    assert info["position_layout"] == "halves" and info["output_bias"] is True


@pytest.mark.parametrize(
    "values,match",
    [
        (dict(model_overrides={"num_layers": 3}), "dropout and attention_dropout only"),
        (dict(freeze=["embeddings"]), "`freeze` takes"),
    ],
)
def test_bad_fine_tuning_options_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(dataset="synthetic", init_from="runs/x", **values)


def test_a_missing_start_run_is_one_clear_error(in_domain, tmp_path):
    config = TrainConfig(dataset=in_domain, output_dir=str(tmp_path / "r"),
                         init_from=str(tmp_path / "nowhere"), verbose=0)  # fmt: skip
    with pytest.raises(FileNotFoundError, match="nowhere is not a run"):
        train(config, log=lambda line: None)
