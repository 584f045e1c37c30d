"""Every example that works offline runs, in its reduced mode."""

import os
import shutil

import pytest

from tests.processes import REPO, run_python

MULTI30K = os.path.join(REPO, "..", "shared", "data", "multi30k")


def _run(name, tmp_path, *args):
    env = {"KT_EXAMPLE_QUICK": "1", "KT_EXAMPLE_DIR": str(tmp_path), "KT_OFFLINE": "1"}
    return run_python(
        os.path.join(REPO, "examples", name), *args, env=env, timeout=900, cwd=str(tmp_path)
    )


@pytest.mark.parametrize(
    "name,expected",
    [
        ("translate_synthetic.py", "BLEU = "),
        ("text_classification.py", "saved and reloaded"),
        ("tune.py", "best:"),
        ("language_model.py", "sampled ("),
        ("serve_and_query.py", "n-best:"),
        ("ted_pt_en.py", "offline; nothing to do"),
    ],
)
def test_example_runs(name, expected, tmp_path, synthetic_tfds, request):
    # The examples read the synthetic corpus from KT_EXAMPLE_DIR/tfds; a copy
    # of the one built for the session saves building it for each.
    shutil.copytree(synthetic_tfds, tmp_path / "tfds")
    # Serving takes a trained run, as after `make demo`: the session's (the
    # training it would do without one is translate_synthetic.py's).
    args = [request.getfixturevalue("trained_run")["run"]] if name == "serve_and_query.py" else []
    result = _run(name, tmp_path, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert expected in result.stdout


@pytest.mark.skipif(not os.path.isdir(MULTI30K), reason="Multi30k is not beside the repository")
def test_multi30k_example(tmp_path):
    result = _run("translate_multi30k.py", tmp_path, MULTI30K)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "BLEU = " in result.stdout
