"""Fixtures of the test suite and of the docstring examples (doctests)."""

import ast
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# On a GPU, each test worker takes memory as it needs it, not most of the
# card at start (JAX and TensorFlow preallocate by default).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests.built_once import built_once  # noqa: E402

# Seeded once: `tf.random.set_seed` clears TensorFlow's eager kernel cache,
# which frees tokenizer resources that module-scoped fixtures already made.
keras.utils.set_random_seed(1234)

from tests.backends import full_float32_products, refuse_host_conversion  # noqa: E402

full_float32_products()
if keras.backend.backend() == "torch":
    refuse_host_conversion()


@pytest.fixture(autouse=True)
def _policy():
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(autouse=True)
def _torch_inference(request):
    """Under PyTorch, tests read outputs as NumPy, which a tensor that
    tracks gradients refuses: only tests marked `trains` track them."""
    if keras.backend.backend() != "torch" or request.node.get_closest_marker("trains"):
        yield
        return
    import torch

    with torch.no_grad():
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def synthetic_tfds(tmp_path_factory):
    """A TFDS data directory with the synthetic corpus built, for tests that
    only read it (building it takes ~25 s; tests/data builds its own)."""
    from keras_transformer.data import sources

    return built_once(
        tmp_path_factory, "tfds", lambda path: sources.load_dataset("synthetic", "train", path)
    )


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, synthetic_tfds):
    """A tiny model trained briefly on the synthetic data, via the CLI.

    Good enough to translate (not well): the tests compare routes, not
    quality.
    """
    root = built_once(tmp_path_factory, "trained", lambda path: _train(path, synthetic_tfds))
    return {"run": os.path.join(root, "run"), "tfds": synthetic_tfds}


@pytest.fixture(scope="session")
def trained_model(trained_run):
    """`(model, source tokenizer, target tokenizer)` of `trained_run`, loaded
    once for the tests that only read them."""
    from keras_transformer.training import load_run

    model, source_tokenizer, target_tokenizer, _ = load_run(trained_run["run"])
    return model, source_tokenizer, target_tokenizer


def _train(root, synthetic_tfds):
    import subprocess
    import sys

    run = os.path.join(root, "run")
    args = [
        sys.executable,
        "-m",
        "keras_transformer.cli",
        "train",
        "--dataset",
        "synthetic",
        "--data-dir",
        synthetic_tfds,
        "--output-dir",
        run,
        "--preset",
        "tiny",
        "--model-overrides",
        '{"num_layers": 1, "d_model": 64, "num_heads": 4, "dff": 128, "dropout": 0.0}',
        "--vocab-size",
        "300",
        "--tokenizer-sample",
        "5000",
        "--batch-tokens",
        "2048",
        "--max-length",
        "64",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "40",
        "--warmup-steps",
        "40",
        "--lr-scale",
        "2.0",
        "--verbose",
        "2",
    ]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="session")
def parallel_files(tmp_path_factory):
    """Small synthetic corpus as parallel text files (train and test)."""
    root = tmp_path_factory.mktemp("corpus")
    from keras_transformer.data.synthetic import generate_pairs

    pairs = generate_pairs(1200, seed=21)
    paths = {}
    for split, chunk in (("train", pairs[:1000]), ("test", pairs[1000:1040])):
        for side, lang in ((0, "en"), (1, "de")):
            path = root / f"{split}.{lang}"
            path.write_text("\n".join(p[side] for p in chunk) + "\n", encoding="utf-8")
            paths[f"{split}.{lang}"] = str(path)
    return paths


@pytest.fixture(scope="session")
def export_base(trained_run, tmp_path_factory):
    """The trained run exported once for the whole run as version 1 of a
    model base path (read only: a test that adds versions copies it)."""
    from keras_transformer.export import export_run
    from tests.export.exported import BEAM_SIZE, MAX_LENGTH, SAMPLING

    def build(path):
        export_run(trained_run["run"], os.path.join(path, "translator"),
                   max_output_length=MAX_LENGTH, beam_size=BEAM_SIZE, **SAMPLING)  # fmt: skip

    return os.path.join(built_once(tmp_path_factory, "exports", build), "translator")


# Names the docstring examples may use without defining them: the
# examples stay short, and they run against a real trained run and export.
_DOCTEST_RESOURCES = {
    "data_dir": ("synthetic_tfds",),
    "export_dir": ("export_base",),
    "export_base": ("export_base",),
    "model": ("trained_run",),
    "run_dir": ("trained_run",),
    "marian_dir": (),
}


def _free_names(source):
    """The names an example reads without defining them: whole names, so
    that `d_model=16` asks for no `model`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return read - bound


@pytest.fixture(autouse=True)
def _doctest_globals(request, doctest_namespace):
    if not hasattr(request.node, "dtest"):  # not a doctest
        return
    doctest_namespace.update(np=np, keras=keras, tmp_dir=str(request.getfixturevalue("tmp_path")))
    source = "\n".join(example.source for example in request.node.dtest.examples)
    needed = _free_names(source) & set(_DOCTEST_RESOURCES)
    if "data_dir" in needed:
        doctest_namespace["data_dir"] = request.getfixturevalue("synthetic_tfds")
    if needed & {"export_dir", "export_base"}:
        base = request.getfixturevalue("export_base")
        doctest_namespace.update(export_base=base, export_dir=os.path.join(base, "1"))
    if "run_dir" in needed:
        doctest_namespace["run_dir"] = request.getfixturevalue("trained_run")["run"]
    if "marian_dir" in needed:
        from tests.interop.marian_checkpoints import build_checkpoint

        pytest.importorskip("transformers")
        doctest_namespace["marian_dir"] = build_checkpoint(
            str(request.getfixturevalue("tmp_path") / "marian")
        )
    if "model" in needed:
        from keras_transformer.training import load_run

        model, source_tokenizer, target_tokenizer, _ = load_run(
            request.getfixturevalue("trained_run")["run"]
        )
        doctest_namespace.update(
            model=model, source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer
        )
