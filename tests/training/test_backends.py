"""Training under JAX or PyTorch; the run exports through TensorFlow."""

import os

import numpy as np
import pytest

from keras_transformer.decoding import Translator
from keras_transformer.export import export_run
from keras_transformer.runtime import SessionModel
from keras_transformer.training import TrainConfig, train
from keras_transformer.training.run_directory import load_run
from tests.training.conftest import TINY, cli

SENTENCES = ["The dog sleeps.", "A young woman reads the book.", ""]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_train_on_another_backend_then_export(backend, parallel_files, tmp_path):
    run = str(tmp_path / "run")
    dataset = f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}"
    # Truncated at 16 tokens, the batches take three shapes: JAX compiles a
    # step per shape, and at TINY's 64 most of the run was compiling.
    short = [*TINY, "--max-length", "16", "--length-policy", "truncate"]
    proc = cli("train", "--backend", backend, "--dataset", dataset, "--valid", "none",
               "--output-dir", run, "--epochs", "2", "--steps-per-epoch", "8", *short)  # fmt: skip
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert f"Backend {backend};" in out
    losses = [float(line.split("loss: ")[1].split()[0]) for line in out.splitlines()
              if " - loss: " in line]  # fmt: skip
    assert len(losses) == 2 and losses[1] < losses[0]

    base = str(tmp_path / "exports")
    version = export_run(run, base, max_output_length=16, beam_size=2)
    model, source, target, _ = load_run(run)
    translator = Translator(model, source, target, beam_size=2, max_output_length=16)
    expected = translator.translate(SENTENCES)
    served = SessionModel(version)
    try:
        text = np.array([s.encode() for s in SENTENCES], dtype=object)
        outputs = served.run("serving_default", {"text": text})
    finally:
        served.close()
    assert outputs["translation"].tolist() == expected["translation"].numpy().tolist()
    np.testing.assert_allclose(outputs["score"], expected["score"].numpy(), atol=1e-4)
    assert os.path.exists(os.path.join(run, "final.weights.h5"))


def test_a_backend_other_than_the_imported_one_is_refused(tmp_path):
    other = "jax" if os.environ.get("KERAS_BACKEND", "tensorflow") != "jax" else "torch"
    config = TrainConfig(output_dir=str(tmp_path / "run"), backend=other)
    with pytest.raises(ValueError, match=f"KERAS_BACKEND={other}"):
        train(config)


def test_tf_distribute_strategies_need_tensorflow():
    with pytest.raises(ValueError, match="needs backend='tensorflow'"):
        TrainConfig(backend="jax", strategy="mirrored")
