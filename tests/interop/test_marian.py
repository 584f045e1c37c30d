"""Marian checkpoints imported exactly: against `transformers` (PyTorch) on
tiny random models built here."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data.tokenizer import END_ID, START_ID
from keras_transformer.decoding import Translator
from keras_transformer.interop import marian
from keras_transformer.training.run_directory import load_run, read_generation
from tests.interop import marian_checkpoints as checkpoints

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CASES = {
    "shared-swish": dict(shared=True, activation="swish"),
    # A deep encoder and a shallow decoder, as OPUS-MT's distilled students.
    "separate-gelu-3+1-layers": dict(shared=False, activation="gelu", seed=1, layers=(3, 1)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def imported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    folder = checkpoints.build_checkpoint(str(root / "marian"), **CASES[request.param])
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
    generation = {**imported["generation"], **overrides}
    return Translator(
        imported["model"], imported["source"], imported["target"],
        beam_size=generation["beam_size"], alpha=generation["alpha"],
        length_penalty=generation["length_penalty"], forced_end=generation["forced_end"],
        max_output_length=generation["max_output_length"],
    )  # fmt: skip


def _decoded(values):
    return [v.decode("utf-8") for v in np.asarray(values).reshape(-1)]


def test_the_run_keeps_the_checkpoint_generation_settings(imported):
    generation = imported["generation"]
    assert generation == {
        "beam_size": 4, "alpha": 1.0, "length_penalty": "power",
        "max_output_length": 23, "forced_end": True,
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


def test_forced_end_at_the_longest_length_as_generate(imported):
    # Short maximum lengths: most hypotheses are ended by force.
    texts = NONEMPTY[:4]
    for max_length in (3, 5):
        expected = _generate(imported, texts, max_length=max_length)
        translator = _translator(imported, max_output_length=max_length - 1)
        got = _decoded(translator.translate(tf.constant(texts))["translation"])
        assert got == expected, max_length
