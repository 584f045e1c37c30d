"""An imported Marian checkpoint through the command line: `import`, then
`export` (plain, `--jit-compile`, `--format ctranslate2`); the exports
translate as `transformers`' `generate()` does, in TensorFlow's C++ loader
too."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.data.tokenizer import END_ID
from keras_transformer.training.run_directory import load_run
from tests import cc_loader
from tests.export.test_ctranslate2 import run_ct2
from tests.interop import marian_checkpoints as checkpoints

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TEXTS = [t for t in checkpoints.TEST_TEXT if t.strip()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("marian-cli")
    folder = checkpoints.build_checkpoint(str(root / "opus-mt"))
    run = str(root / "run")
    assert cli.main(["import", "--format", "marian", folder, "--output-dir", run]) == 0
    hf, tokenizer = checkpoints.hf_model(folder), checkpoints.hf_tokenizer(folder)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        beam = tokenizer.batch_decode(hf.generate(**batch), skip_special_tokens=True)
        greedy = hf.generate(**batch, num_beams=1)
    return dict(root=root, folder=folder, run=run, beam=beam, greedy=greedy, hf_tokenizer=tokenizer)


def _export(imported, name, *flags):
    base = str(imported["root"] / name)
    assert cli.main(["export", "--run", imported["run"], "--export-base", base, *flags]) == 0
    return os.path.join(base, "1")


def _translations(version):
    loaded = tf.saved_model.load(version)
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))["translation"]
    return [t.decode("utf-8") for t in out.numpy()]


def test_a_plain_export_decodes_as_generate_in_both_loaders(imported):
    version = _export(imported, "plain")
    assert _translations(version) == imported["beam"]
    try:
        binary = cc_loader.build()
    except cc_loader.CcLoaderUnavailable as error:
        pytest.skip(f"TensorFlow's C++ loader cannot be built here: {error}")
    outputs, _ = cc_loader.run(binary, version, "serving_default", TEXTS)
    assert [t.decode("utf-8") for t in outputs["translation"].tolist()] == imported["beam"]


def test_a_compiled_export_decodes_as_generate(imported):
    version = _export(imported, "compiled", "--jit-compile", "--batch-sizes", "8")
    assert _translations(version) == imported["beam"]


def test_the_ctranslate2_export_gives_generate_s_greedy_tokens(imported):
    version = _export(imported, "ct2", "--format", "ctranslate2")
    _, source, target, _ = load_run(imported["run"])
    source_pieces, target_pieces = source.pieces(), target.pieces()
    ids = source.tokenize(tf.constant(TEXTS)).to_list()
    sources = [[source_pieces[i] for i in row] for row in ids]
    tokenizer = imported["hf_tokenizer"]
    expected = [
        tokenizer.convert_ids_to_tokens([i for i in row if i not in (0, tokenizer.pad_token_id)])
        for row in imported["greedy"].tolist()
    ]
    # generate(): 24 positions, the start token and a forced end among them.
    theirs = run_ct2(version, sources, expected, 22)
    # generate()'s forced end token at the longest length is CTranslate2's
    # cut there: the same tokens.
    assert theirs["greedy"] == expected
    assert target_pieces[END_ID] == "</s>"
    assert np.isfinite(np.concatenate(theirs["log_probs"])).all()
