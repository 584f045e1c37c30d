"""A model trained under JAX or PyTorch loads into TensorFlow, which exports."""

import textwrap

import keras
import numpy as np
import pytest

from keras_transformer.models import Transformer
from tests.backends import assert_allclose, tensorflow_only, to_numpy
from tests.processes import run_python

CONFIG = dict(
    num_layers=2,
    d_model=32,
    num_heads=4,
    dff=64,
    source_vocab_size=40,
    target_vocab_size=50,
    dropout=0.0,
)

TRAIN = textwrap.dedent("""
    import sys
    import numpy as np
    import keras
    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.models import Transformer
    assert keras.backend.backend() == sys.argv[2]
    keras.utils.set_random_seed(3)
    model = Transformer(**{config})
    data = np.load(sys.argv[1] + "/data.npz")
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    # A few updates, so that the weights are not the initial ones.
    model.fit((data["src"], data["tgt"]), data["tgt"], batch_size=4, epochs=2, verbose=0)
    logits = keras.ops.convert_to_numpy(model((data["src"], data["tgt"])))
    np.save(sys.argv[1] + "/logits.npy", logits)
    model.save_weights(sys.argv[1] + "/model.weights.h5")
    model.save(sys.argv[1] + "/model.keras")
""").format(config=CONFIG)


@tensorflow_only
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_weights_from_another_backend_give_the_same_logits(backend, tmp_path, rng):
    src = rng.integers(1, 40, (8, 7))
    tgt = rng.integers(1, 50, (8, 6))
    src[1, 4:] = 0
    tgt[2, 3:] = 0
    np.savez(tmp_path / "data.npz", src=src, tgt=tgt)
    result = run_python(
        "-c", TRAIN, str(tmp_path), backend, env={"KERAS_BACKEND": backend}, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = np.load(tmp_path / "logits.npy")

    model = Transformer(**CONFIG)
    model.build(((None, None), (None, None)))
    model.load_weights(str(tmp_path / "model.weights.h5"))
    assert_allclose(to_numpy(model((src, tgt))), expected, rtol=1e-4, atol=1e-4)
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert_allclose(to_numpy(loaded((src, tgt))), expected, rtol=1e-4, atol=1e-4)
    # Not trivially equal: training moved the weights away from a fresh model's.
    fresh = Transformer(**CONFIG)
    assert not np.allclose(to_numpy(fresh((src, tgt))), expected, atol=1e-3)
