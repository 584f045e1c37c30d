"""Importing the layers costs a Keras user nothing beyond Keras, and a
missing optional dependency is an error that names the install command."""

import json

import pytest

from tests.processes import run_python

HEAVY = [
    "tensorflow_text",
    "tensorflow_datasets",
    "keras_tuner",
    "grpc",
    "tensorflow_serving",
    "matplotlib",
    "sacrebleu",
    "sentencepiece",
]
LIGHT = [
    "keras_transformer.layers",
    "keras_transformer.models",
    "keras_transformer.losses",
    "keras_transformer.metrics",
    "keras_transformer.schedules",
]


def _loaded_after(statement):
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(json.loads(result.stdout.splitlines()[-1]))


def _heavy(modules):
    return {m for m in modules if m.split(".")[0] in HEAVY}


@pytest.fixture(scope="module")
def added_by():
    """What each light module adds to the modules loaded before it, after a
    bare `import keras` (`"keras"`), in one process: imports only add, so
    a module that loads nothing beyond those before it loads nothing
    beyond Keras alone."""
    code = (
        "import sys, json\nadded = {}\nbefore = set(sys.modules)\nimport keras\n"
        "added['keras'] = sorted(set(sys.modules) - before)\n"
        f"for name in {LIGHT!r}:\n"
        "    before = set(sys.modules)\n    __import__(name)\n"
        "    added[name] = sorted(set(sys.modules) - before)\n"
        "print(json.dumps(added))"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    return {k: set(v) for k, v in json.loads(result.stdout.splitlines()[-1]).items()}


@pytest.mark.parametrize("module", LIGHT)
def test_light_modules_load_no_optional_stack(module, added_by):
    # Keras itself imports matplotlib when it is installed; what counts is
    # what importing our module adds to a bare `import keras`.
    assert _heavy(added_by["keras"]), "the check would see no heavy module loaded"
    assert _heavy(added_by[module]) == set()
    assert not any(m.startswith("keras_transformer.training") for m in added_by[module])


def _environment_changes(statement):
    code = (
        "import os, sys, json\n"
        "before = dict(os.environ)\n"
        f"{statement}\n"
        "keys = set(before) | set(os.environ)\n"
        "changed = sorted(k for k in keys if before.get(k) != os.environ.get(k))\n"
        "print(json.dumps({'changed': changed, 'modules': sorted(sys.modules)}))"
    )
    result = run_python("-c", code, unset=("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL"))
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_importing_the_package_first_loads_nothing_and_registers_with_keras(tmp_path):
    # A program imports the package before Keras to choose the backend.
    loaded = _loaded_after("import keras_transformer")
    assert not {m for m in loaded if m.split(".")[0] in ("keras", "tensorflow", "jax", "torch")}
    path = str(tmp_path / "m.keras")
    save = (
        "import keras\nfrom keras_transformer.layers import PositionalEmbedding\n"
        "inputs = keras.Input((5,), dtype='int32')\n"
        f"keras.Model(inputs, PositionalEmbedding(10, 8)(inputs)).save({path!r})"
    )
    assert run_python("-c", save).returncode == 0
    for statement in ("import keras\nimport keras_transformer",  # import sorting's order
                      "import keras_transformer\nimport keras",  # no register() needed
                      "import keras_transformer\nfrom keras import saving\nimport keras",
                      "import keras\nfrom keras_transformer import training"):  # fmt: skip
        registered = "print(sorted(keras.saving.get_custom_objects()))"
        result = run_python("-c", f"{statement}\nkeras.saving.load_model({path!r})\n{registered}")
        assert result.returncode == 0, (statement, result.stderr[-2000:])
        # Every class, not only the ones the file holds: a Transformer, a loss.
        names = result.stdout.splitlines()[-1]
        for name in ("Transformer", "MaskedSparseCategoricalCrossentropy", "WarmupSchedule"):
            assert f"'keras_transformer>{name}'" in names, (statement, names)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_package_imported_first_registers_with_keras_on_any_backend(backend):
    # Loading a model of our layers needs no TensorFlow outside TensorFlow's backend.
    code = (
        "import sys\nimport keras_transformer\nimport keras\n"
        "from keras_transformer.layers import EncoderBlock\n"
        "names = keras.saving.get_custom_objects()\n"
        "print('keras_transformer>Transformer' in names, 'tensorflow' in sys.modules)"
    )
    result = run_python("-c", code, env={"KERAS_BACKEND": backend})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "True False"


@pytest.mark.parametrize(
    "argv", [["--help"], ["train", "--help"], ["serve", "--help"], ["tune", "--help"],
             ["serve", "--port", "x"], ["export"]],
)  # fmt: skip
def test_help_and_flag_errors_load_neither_keras_nor_tensorflow(argv):
    code = (
        "import sys\nfrom keras_transformer import cli\n"
        f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('keras', 'tensorflow', 'jax', 'torch', 'grpc', 'keras_tuner')))"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_root_package_is_light_and_leaves_the_environment_alone():
    # Keras may import JAX, which sets TF_CPP_MIN_LOG_LEVEL: not ours to undo.
    keras_only = set(_environment_changes("import keras")["changed"])
    report = _environment_changes("import keras_transformer")
    assert set(report["changed"]) - keras_only == set()
    loaded = set(report["modules"])
    assert not {"keras_transformer.training", "keras_transformer.data"} & loaded
    assert "tensorflow_text" not in loaded


@pytest.mark.parametrize(
    "module,missing,extra",
    [
        ("keras_transformer.data", "tensorflow_text", "data"),
        ("keras_transformer.training", "tensorflow_text", "data"),
        ("keras_transformer.tuning", "keras_tuner", "tuning"),
        ("keras_transformer.serving", "grpc", "serving"),
        ("keras_transformer.export", "tensorflow_text", "serving"),
    ],
)
def test_a_missing_extra_names_the_pip_command(module, missing, extra):
    # A None entry in sys.modules makes `import missing` fail, as if absent.
    code = f"import sys\nsys.modules[{missing!r}] = None\nimport {module}"
    result = run_python("-c", code)
    assert result.returncode != 0
    assert f'pip install "keras-transformer-nmt[{extra}]"' in result.stderr


def test_plots_without_matplotlib_name_the_extra():
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"
        "from keras_transformer._extras import require\n"
        "require('matplotlib')"
    )
    result = run_python("-c", code)
    assert 'pip install "keras-transformer-nmt[plots]"' in result.stderr


@pytest.mark.parametrize(
    "first",
    ["import keras_transformer.decoding.beam_search", "from keras_transformer.decoding import *"],
)
def test_a_function_named_as_its_module_stays_the_function(first):
    # Importing `decoding/beam_search.py` once made the package's
    # `beam_search` that module for good, and `beam_search(...)` failed.
    code = (
        f"{first}\n"
        "from keras_transformer.decoding import beam_search\n"
        "import keras_transformer.decoding.beam_search\n"
        "import keras_transformer.decoding as decoding\n"
        "print(callable(beam_search), callable(decoding.beam_search))"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["True", "True"]
