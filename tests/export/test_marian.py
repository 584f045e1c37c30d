"""`export --format huggingface`: a run written as a Marian checkpoint that
`transformers` loads with the same log-probabilities; a run Marian cannot
express is refused in one line."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.export.marian import export_marian
from keras_transformer.interop.marian import import_marian
from keras_transformer.models import Transformer
from keras_transformer.training.run_directory import RunDirectory, load_run
from tests.interop import marian_checkpoints as checkpoints

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

PAIRS = list(zip(checkpoints.SOURCE_TEXT[:6], checkpoints.TARGET_TEXT[:6]))


def _hf_log_probs(folder, sources, targets):
    return checkpoints.hf_log_probs(
        checkpoints.hf_model(folder), checkpoints.hf_tokenizer(folder), sources, targets
    )


def _our_log_probs(run, sources, targets):
    from keras_transformer.decoding import Translator

    model, source, target, _ = load_run(run)
    scored = Translator(model, source, target).score(tf.constant(sources), tf.constant(targets))
    return scored["log_prob"].numpy()


def _export(run, base):
    assert cli.main(["export", "--run", run, "--export-base", base,
                     "--format", "huggingface"]) == 0  # fmt: skip
    return os.path.join(base, "1")


@pytest.mark.parametrize(
    "shared,tied", [(True, True), (False, True), (True, False), (False, False)],
    ids=["shared", "separate", "shared-untied", "separate-untied"],
)  # fmt: skip
def test_an_imported_run_goes_back_with_the_same_log_probabilities(shared, tied, tmp_path):
    folder = checkpoints.build_checkpoint(str(tmp_path / "m"), shared=shared, seed=2,
                                          renormalize=shared, tied=tied)  # fmt: skip
    run = import_marian(folder, str(tmp_path / "run"))["run"]
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["tie_word_embeddings"] is tied
    model, _, _, _ = load_run(run)
    assert (model.output_projection is None) is tied
    written = _export(run, str(tmp_path / "hf"))
    # The generation settings go back with the model.
    with open(os.path.join(written, "generation_config.json")) as f:
        assert json.load(f).get("renormalize_logits", False) is shared
    if shared and tied:
        # ... under the export's own decoding flags.
        assert cli.main(["export", "--run", run, "--export-base", str(tmp_path / "hf-flags"),
                         "--format", "huggingface", "--beam-size", "3", "--alpha", "-0.5",
                         "--max-output-length", "9", "--no-renormalize"]) == 0  # fmt: skip
        with open(tmp_path / "hf-flags" / "1" / "generation_config.json") as f:
            flagged = json.load(f)
        assert (flagged["num_beams"], flagged["length_penalty"], flagged["max_length"]) == (
            3,
            -0.5,
            10,
        )
        assert "renormalize_logits" not in flagged
        # Suppressed phrases and the unknown token go as bad_words_ids, in
        # the checkpoint's ids (the Marian tokenizer's own for the phrase).
        (tmp_path / "phrases.txt").write_text("Haus\n", encoding="utf-8")
        assert cli.main(["export", "--run", run, "--export-base", str(tmp_path / "hf-bad"),
                         "--format", "huggingface", "--suppress-sequences",
                         str(tmp_path / "phrases.txt"), "--disable-unk"]) == 0  # fmt: skip
        with open(tmp_path / "hf-bad" / "1" / "generation_config.json") as f:
            bad = json.load(f)["bad_words_ids"]
        tokenizer = checkpoints.hf_tokenizer(str(tmp_path / "hf-bad" / "1"))
        haus = tokenizer(text_target="Haus", add_special_tokens=False)["input_ids"]
        assert bad == [[flagged["pad_token_id"]], [tokenizer.unk_token_id], haus]
    with open(os.path.join(written, "config.json")) as f:
        assert json.load(f)["tie_word_embeddings"] is tied
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    original, _ = _hf_log_probs(folder, sources, targets)
    back, _ = _hf_log_probs(written, sources, targets)
    np.testing.assert_allclose(back, original, atol=1e-4)
    # Sentence sums of about 50 tokens, each equal to 1e-4.
    np.testing.assert_allclose(
        _our_log_probs(run, sources, targets), original, rtol=1e-5, atol=1e-4
    )
    assert {"config.json", "model.safetensors", "generation_config.json", "source.spm",
            "target.spm", "vocab.json"} <= set(os.listdir(written))  # fmt: skip


def _trained_here(path, **overrides):
    """A run as `train` writes one: SentencePiece tokenizers with the
    reserved ids, and a model with the paper's interleaved table."""
    run = RunDirectory(path)
    text = checkpoints.SOURCE_TEXT + checkpoints.TARGET_TEXT
    tokenizer = SubwordTokenizer.train(text, 90)
    tokenizer.save(run.source_tokenizer)
    tokenizer.save(run.target_tokenizer)
    options = dict(layer_norm_epsilon=1e-5, activation="relu", dropout=0.0)
    options.update(overrides)
    model = Transformer(2, 32, 4, 64, tokenizer.vocab_size, tokenizer.vocab_size, **options)
    model.build(((None, None), (None, None)))
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(size=w.shape).astype("f4") * 0.3
                       for w in model.get_weights()])  # fmt: skip
    run.write_json(run.model_config, model.get_config())
    run.write_json(run.config, {"trained": "here"})
    model.save_weights(run.final_weights)
    return run.path


@pytest.mark.parametrize(
    "overrides",
    [
        dict(share_embeddings=True),
        dict(activation="gelu", num_decoder_layers=1, decoder_num_heads=2, decoder_dff=48),
        dict(activation="silu", output_bias=True, tie_output_embeddings=True),
        dict(share_embeddings=True, tie_output_embeddings=False),
    ],
    ids=[
        "shared-relu",
        "separate-gelu-1-narrower-decoder-layer",
        "tied-silu-bias",
        "shared-untied",
    ],
)
def test_a_run_trained_here_loads_in_transformers_with_our_log_probabilities(overrides, tmp_path):
    run = _trained_here(str(tmp_path / "run"), **overrides)
    written = _export(run, str(tmp_path / "hf"))
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    theirs, _ = _hf_log_probs(written, sources, targets)
    np.testing.assert_allclose(theirs, _our_log_probs(run, sources, targets), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(norm_first=True), "pre-norm"),
        (dict(position_encoding="learned"), "learned positions"),
        (dict(layer_norm_epsilon=1e-6), "layer_norm_epsilon=1e-06"),
    ],
)
def test_what_marian_cannot_express_is_refused_in_one_line(overrides, match, tmp_path, capsys):
    run = _trained_here(str(tmp_path / "run"), **overrides)
    code = cli.main(["export", "--run", run, "--export-base", str(tmp_path / "hf"),
                     "--format", "huggingface"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("keras-transformer export: error: Marian cannot express this run")
    assert match in err[0]
    assert not os.path.exists(tmp_path / "hf" / "1")


def test_an_existing_folder_is_never_overwritten(tmp_path):
    run = _trained_here(str(tmp_path / "run"))
    model, source, target, _ = load_run(run)
    os.makedirs(tmp_path / "out")
    with pytest.raises(FileExistsError):
        export_marian(model, source, target, str(tmp_path / "out"))
