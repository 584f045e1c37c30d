"""Marian checkpoints imported exactly: against `transformers` (PyTorch) on
tiny random models built here."""

import copy
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.data.tokenizer import END_ID, START_ID
from keras_transformer.decoding import GenerationConfig, Translator
from keras_transformer.interop import marian
from keras_transformer.training.run_directory import load_run, read_generation
from tests.interop import marian_checkpoints as checkpoints

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CASES = {
    # generate() normalizes again once padding is banned (renormalize_logits).
    "shared-swish-renormalized": dict(
        shared=True, activation="swish", renormalize=True, pad_bias=3.0
    ),
    # A deep encoder and a shallow decoder, as OPUS-MT's distilled students,
    # and each stack with heads and a feed-forward width of its own.
    "separate-gelu-3+1-layers-own-widths": dict(
        shared=False,
        activation="gelu",
        seed=1,
        layers=(3, 1),
        pad_bias=3.0,
        heads=(2, 4),
        ffn_dim=(64, 48),
    ),  # fmt: skip
}


@pytest.fixture(scope="module", params=sorted(CASES))
def imported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    folder = checkpoints.build_checkpoint(str(root / "marian"), **CASES[request.param])
    return _import(folder, root)


def _import(folder, root):
    summary = marian.import_marian(folder, str(root / "run"))
    model, source, target, _ = load_run(summary["run"])
    return dict(
        folder=folder, summary=summary, model=model, source=source, target=target,
        generation=read_generation(summary["run"]), hf=checkpoints.hf_model(folder),
        hf_tokenizer=checkpoints.hf_tokenizer(folder),
    )  # fmt: skip


def _to_marian(ids, order):
    return [order[i] for i in ids]


def _orders(imported):
    ids = imported["summary"]
    config = marian.read_marian(imported["folder"])
    spec = config["spec"]
    source = marian.marian_order(ids["source_vocab_size"], spec.pad_id, config["source"][2],
                                 spec.eos_id)  # fmt: skip
    target = marian.marian_order(ids["target_vocab_size"], spec.pad_id, config["target"][2],
                                 spec.eos_id)  # fmt: skip
    return source, target, spec


def test_token_ids_equal_marian_tokenizer(imported):
    source_order, target_order, _ = _orders(imported)
    hf = imported["hf_tokenizer"]
    expected = hf(checkpoints.TEST_TEXT)["input_ids"]
    ours = imported["source"].tokenize(tf.constant(checkpoints.TEST_TEXT)).to_list()
    for text, want, got in zip(checkpoints.TEST_TEXT, expected, ours):
        assert _to_marian(got + [END_ID], source_order) == want, text
    # The target side, as labels.
    expected = hf(text_target=checkpoints.TEST_TEXT)["input_ids"]
    ours = imported["target"].tokenize(tf.constant(checkpoints.TEST_TEXT)).to_list()
    for text, want, got in zip(checkpoints.TEST_TEXT, expected, ours):
        assert _to_marian(got + [END_ID], target_order) == want, text


def test_the_import_reports_pieces_sentencepiece_never_produces(imported):
    unproduced = imported["summary"]["unproduced_pieces"]
    assert unproduced["source"] >= 1  # the planted piece
    if not imported["summary"]["shared_vocabulary"]:
        assert unproduced["target"] >= 3  # fillers and tails


def test_teacher_forced_log_probabilities_equal(imported):
    source_order, target_order, spec = _orders(imported)
    hf = imported["hf_tokenizer"]
    batch = hf(checkpoints.TEST_TEXT[:6], text_target=checkpoints.TEST_TEXT[2:8],
               padding=True, return_tensors="pt")  # fmt: skip
    labels = batch["labels"]
    # Against the model in float64, with 1e-4 beyond twice the float32
    # error of transformers' own model: these tiny models' large weights
    # (init_std 0.5) put float32's floor near 1e-4 (PyTorch float32 against
    # float64 reached 2.8e-4 on an AVX2-only machine, where the two float32
    # models differed by 1.9e-4).
    with torch.no_grad():
        out32 = imported["hf"](input_ids=batch["input_ids"],
                               attention_mask=batch["attention_mask"], labels=labels)  # fmt: skip
        out = copy.deepcopy(imported["hf"]).double()(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels
        )
    expected = torch.log_softmax(out.logits, -1).numpy()
    # Ours: the same ids in our order; the decoder input starts from our start token.
    to_ours_source = {m: i for i, m in enumerate(source_order) if i != START_ID}
    to_ours_target = {m: i for i, m in enumerate(target_order) if i != START_ID}
    src = np.vectorize(to_ours_source.get)(batch["input_ids"].numpy())
    label_ids = np.vectorize(to_ours_target.get)(labels.numpy())
    tgt_in = np.concatenate([np.full((len(src), 1), START_ID), label_ids[:, :-1]], axis=1)
    logits = np.asarray(imported["model"]((src, tgt_in), training=False), np.float64)
    ours = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    # Our columns in Marian's order (our start column aside).
    columns = [to_ours_target[m] for m in range(expected.shape[-1])]
    ours = ours[..., columns]
    real = labels.numpy() != spec.pad_id
    floor = np.abs(torch.log_softmax(out32.logits, -1).numpy() - expected)[real].max()
    np.testing.assert_allclose(ours[real], expected[real], atol=1e-4 + 2 * floor)


def _generate(imported, texts, **options):
    hf = imported["hf_tokenizer"]
    batch = hf(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        ids = imported["hf"].generate(**batch, **options)
    return hf.batch_decode(ids, skip_special_tokens=True)


def _translator(imported, **overrides):
    generation = GenerationConfig.from_dict(imported["generation"]).merged(**overrides)
    return Translator(imported["model"], imported["source"], imported["target"], generation)


def _decoded(values):
    return [v.decode("utf-8") for v in np.asarray(values).reshape(-1)]


@pytest.mark.parametrize("jit_compile", [False, True], ids=["plain", "compiled"])
def test_score_cuts_only_at_the_position_table(imported, jit_compile):
    # Sources and targets of 14 to 64 tokens, past an input and generation
    # cap of 8: each is scored whole, as transformers scores its labels
    # (its position table is 64).
    sources = checkpoints.SOURCE_TEXT[:3]
    targets = [checkpoints.TARGET_TEXT[3], checkpoints.TARGET_TEXT[0],
               " ".join(checkpoints.TARGET_TEXT[0:3:2])]  # fmt: skip
    expected, lengths = checkpoints.hf_log_probs(imported["hf"], imported["hf_tokenizer"],
                                                 sources, targets)  # fmt: skip
    assert lengths.min() > 8 and lengths.max() > 48, lengths
    # Compiled for 8 tokens at most: longer rows run uncompiled, not cut.
    translator = Translator(imported["model"], imported["source"], imported["target"],
                            max_input_length=8, max_output_length=8, jit_compile=jit_compile,
                            batch_sizes=(4,) if jit_compile else None,
                            lengths=(8,) if jit_compile else None)  # fmt: skip
    score = tf.function(translator.score, autograph=False)
    scored = score(tf.constant(sources), tf.constant(targets))
    np.testing.assert_array_equal(scored["length"].numpy(), lengths)
    np.testing.assert_allclose(scored["log_prob"].numpy(), expected, rtol=1e-5, atol=2e-4)
    # Past the table, the cut is the table's, and `length` says so.
    long = " ".join(checkpoints.TARGET_TEXT * 4)
    cut = score(tf.constant([sources[0]]), tf.constant([long]))
    assert cut["length"].numpy().tolist() == [imported["model"].max_length]


def test_the_run_keeps_the_checkpoint_generation_settings(imported):
    generation = imported["generation"]
    renormalized = bool(imported["hf"].generation_config.renormalize_logits)
    assert generation == {
        "beam_size": 4, "alpha": 1.0, "length_penalty": "power",
        "max_output_length": 23, "forced_end": True, "renormalize": renormalized,
    }  # fmt: skip


# generate() translates an empty line (its source is the end token alone);
# here an empty line translates to an empty line, as everywhere in this
# library (`Translator`, the exports, the corpus jobs).
NONEMPTY = [t for t in checkpoints.TEST_TEXT if t.strip()]


def test_an_empty_line_translates_to_an_empty_line(imported):
    got = _translator(imported).translate(tf.constant(["", "   "]))["translation"]
    assert _decoded(got) == ["", ""]


def test_greedy_translations_identical(imported):
    texts = NONEMPTY
    expected = _generate(imported, texts, num_beams=1)
    translator = _translator(imported, beam_size=1)
    got = _decoded(translator.translate_greedy(tf.constant(texts))["translation"])
    assert got == expected


def test_beam_translations_identical_with_the_checkpoint_settings(imported):
    texts = NONEMPTY
    expected = _generate(imported, texts)  # the checkpoint's own generation_config
    got = _decoded(_translator(imported).translate(tf.constant(texts))["translation"])
    assert got == expected


def test_beam_scores_equal_generate_s(imported):
    # The scores see what the translations may not: the normalization once
    # padding is banned (renormalize_logits) moves every score a little.
    texts = NONEMPTY
    hf = imported["hf_tokenizer"]
    batch = hf(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = imported["hf"].generate(**batch, output_scores=True, return_dict_in_generate=True)
    expected = out.sequences_scores.numpy()
    got = _translator(imported).translate(tf.constant(texts))["score"].numpy().reshape(-1)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    flipped = not imported["generation"]["renormalize"]
    other = _translator(imported, renormalize=flipped).translate(tf.constant(texts))["score"]
    assert np.abs(other.numpy().reshape(-1) - expected).max() > 1e-3


@pytest.mark.parametrize("length_penalty", [-1.0, 2.0])
def test_other_length_penalties_decode_as_generate(imported, length_penalty):
    # generate() takes a negative length_penalty (short translations
    # favoured); the import keeps it, and the searches stop as generate().
    texts = NONEMPTY
    hf = imported["hf_tokenizer"]
    batch = hf(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = imported["hf"].generate(**batch, length_penalty=length_penalty,
                                      output_scores=True, return_dict_in_generate=True)  # fmt: skip
    expected = hf.batch_decode(out.sequences, skip_special_tokens=True)
    got = _translator(imported, alpha=length_penalty).translate(tf.constant(texts))
    assert _decoded(got["translation"]) == expected
    # A negative exponent multiplies the log-probability by the length:
    # float32's error grows with the score (-550 here), hence rtol.
    np.testing.assert_allclose(
        got["score"].numpy().reshape(-1), out.sequences_scores.numpy(), atol=1e-4, rtol=1e-5
    )


def test_forced_end_at_the_longest_length_as_generate(imported):
    # Short maximum lengths: most hypotheses are ended by force.
    texts = NONEMPTY[:4]
    for max_length in (3, 5):
        expected = _generate(imported, texts, max_length=max_length)
        translator = _translator(imported, max_output_length=max_length - 1)
        got = _decoded(translator.translate(tf.constant(texts))["translation"])
        assert got == expected, max_length


def _generation_keys_into_config(folder, **changes):
    """The folder as snapshots saved before generation_config.json existed
    keep it: generate()'s settings in config.json."""
    path = os.path.join(folder, "generation_config.json")
    with open(path) as f:
        settings = {**json.load(f), **changes}
    os.remove(path)
    config_path = os.path.join(folder, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    with open(config_path, "w") as f:
        json.dump({**config, **settings}, f)


def test_a_folder_without_generation_config_decodes_with_config_json_s_settings(tmp_path):
    folder = checkpoints.build_checkpoint(
        str(tmp_path / "m"), num_beams=3, max_length=20, renormalize=True, pad_bias=3.0, seed=3
    )
    _generation_keys_into_config(folder)
    summary = marian.import_marian(folder, str(tmp_path / "run"))
    hf = checkpoints.hf_model(folder)
    assert hf.generation_config.num_beams == 3  # generate() reads config.json too
    generation = read_generation(summary["run"])
    assert generation == {
        "beam_size": 3, "alpha": 1.0, "length_penalty": "power",
        "max_output_length": 19, "forced_end": True, "renormalize": True,
    }  # fmt: skip
    model, source, target, _ = load_run(summary["run"])
    imported = dict(model=model, source=source, target=target, generation=generation, hf=hf,
                    hf_tokenizer=checkpoints.hf_tokenizer(folder))  # fmt: skip
    got = _decoded(_translator(imported).translate(tf.constant(NONEMPTY))["translation"])
    assert got == _generate(imported, NONEMPTY)


def test_generate_settings_the_searches_do_not_apply_are_named_at_import(tmp_path, capsys):
    folder = checkpoints.build_checkpoint(str(tmp_path / "m"), seed=4)
    path = os.path.join(folder, "generation_config.json")
    with open(path) as f:
        settings = json.load(f)
    pad = settings["pad_token_id"]
    settings.update(no_repeat_ngram_size=3, repetition_penalty=1.2, early_stopping=False,
                    bad_words_ids=[[pad], [5]], max_new_tokens=10)  # fmt: skip
    with open(path, "w") as f:
        json.dump(settings, f)
    run = str(tmp_path / "run")
    assert cli.main(["import", "--format", "marian", folder, "--output-dir", run]) == 0
    out = capsys.readouterr().out
    generation = read_generation(run)
    # max_new_tokens counts what is generated; max_length counted the start.
    assert generation["max_output_length"] == 10
    assert generation["ignored"] == {
        "no_repeat_ngram_size": 3, "repetition_penalty": 1.2, "bad_words_ids": [[pad], [5]],
    }  # fmt: skip
    note = [line for line in out.splitlines() if line.startswith("note: generate() settings")]
    assert len(note) == 1 and "no_repeat_ngram_size" in note[0] and "early_stopping" not in note[0]


@pytest.mark.parametrize("name", sorted(marian.ACTIVATIONS))
def test_each_activation_imported_is_transformers_own_and_goes_back_as_one(name):
    from transformers.activations import ACT2FN

    from keras_transformer.export.marian import ACTIVATIONS as BACK
    from keras_transformer.layers import activations

    x = np.concatenate([np.linspace(-12, 12, 961), [-40.0, 40.0]]).astype("float32")
    ours = activations.get(marian.ACTIVATIONS[name])
    expected = ACT2FN[name](torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.asarray(ours(tf.constant(x))), expected, rtol=1e-6, atol=1e-6)
    # The name written back imports as the same function.
    assert activations.get(marian.ACTIVATIONS[BACK[ours.__name__]]) is ours


@pytest.mark.parametrize(
    "name,keras_name,written",
    [
        # transformers' gelu_new (BERT's, GPT-2's): not Keras's exact "gelu".
        ("gelu_new", "keras_transformer>gelu_tanh", "gelu_new"),
        ("quick_gelu", "keras_transformer>gelu_sigmoid", "quick_gelu"),
        ("mish", "mish", "mish"),
    ],
)  # fmt: skip
def test_other_activations_import_exactly_and_go_back(tmp_path, name, keras_name, written):
    folder = checkpoints.build_checkpoint(str(tmp_path / "m"), activation=name, seed=5)
    imported = _import(folder, tmp_path)
    saved = imported["model"].get_config()["activation"]  # Keras's own by name
    assert (saved["config"] if isinstance(saved, dict) else saved) == keras_name
    test_teacher_forced_log_probabilities_equal(imported)
    test_greedy_translations_identical(imported)
    out = str(tmp_path / "hf")
    assert cli.main(["export", "--run", imported["summary"]["run"], "--export-base", out,
                     "--format", "huggingface"]) == 0  # fmt: skip
    with open(os.path.join(out, "1", "config.json")) as f:
        assert json.load(f)["activation_function"] == written


# The controls, as generate() has them: bad_words_ids for suppressed
# phrases, a decoder prompt for a target prefix.


def _target_ids(imported, text):
    """`text` in the checkpoint's target ids, as generate() reads them."""
    hf = imported["hf_tokenizer"]
    return hf(text_target=text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_suppressed_phrases_decode_as_generate_s_bad_words_ids(imported, beam_size):
    texts = NONEMPTY
    free = _generate(imported, texts, num_beams=beam_size)
    # Phrases the free translations hold: two words each, and one word.
    phrases = sorted({" ".join(t.split()[:2]) for t in free if len(t.split()) > 1})[:3]
    phrases.append(next(t.split()[-1] for t in free if t.split()))
    bad = [_target_ids(imported, p) for p in phrases]
    pad = imported["hf"].generation_config.pad_token_id
    expected = _generate(imported, texts, num_beams=beam_size, bad_words_ids=[[pad], *bad])
    assert expected != free
    translator = _translator(imported, beam_size=beam_size, suppress_sequences=phrases)
    got = _decoded(translator.translate(tf.constant(texts))["translation"])
    assert got == expected


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_target_prefix_decodes_as_generate_s_decoder_prompt(imported, beam_size):
    texts = NONEMPTY[:4]
    free = _generate(imported, texts, num_beams=beam_size)
    # Each its own prefix: the first pieces of another line's translation
    # (the random model's words run long), as text that tokenizes back to
    # them.
    target = imported["target"]
    prefixes = []
    for i in range(len(texts)):
        ids = target.tokenize(tf.constant([free[(i + 1) % len(free)] or "Haus"]))[0][:2]
        prefix = target.detokenize(ids[None])[0].numpy().decode("utf-8")
        assert target.tokenize(tf.constant([prefix]))[0].numpy().tolist() == ids.numpy().tolist()
        prefixes.append(prefix)
    hf, start = imported["hf_tokenizer"], imported["hf"].generation_config.decoder_start_token_id
    expected, scores = [], []
    for text, prefix in zip(texts, prefixes):
        batch = hf([text], return_tensors="pt")
        prompt = torch.tensor([[start, *_target_ids(imported, prefix)]])
        with torch.no_grad():
            out = imported["hf"].generate(
                **batch,
                num_beams=beam_size,
                decoder_input_ids=prompt,
                output_scores=True,
                return_dict_in_generate=True,
            )
        expected += hf.batch_decode(out.sequences, skip_special_tokens=True)
        if beam_size > 1:
            scores.append(float(out.sequences_scores[0]))
    translator = _translator(imported, beam_size=beam_size)
    got = translator.translate(tf.constant(texts), target_prefix=tf.constant(prefixes))
    assert _decoded(got["translation"]) == expected
    assert all(t.startswith(p) for t, p in zip(expected, prefixes))
    if beam_size > 1:  # the prompt scores nothing, and its length is not counted
        np.testing.assert_allclose(got["score"].numpy(), scores, atol=1e-4)
