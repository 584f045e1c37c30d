"""The translate_sample and score signatures of the export."""

import os

import numpy as np
import pytest

from keras_transformer.export import export_run
from keras_transformer.runtime import SessionModel, SignatureError
from tests.export.exported import MAX_LENGTH

SENTENCES = ["The dog sleeps.", "A young woman reads the book because the children laugh.", ""]


def _strings(*values):
    return np.array([v.encode("utf-8") for v in values], dtype=object)


@pytest.fixture(scope="module")
def shared(export_base):
    """The shared export, whose translate_sample is greedy (top-k 1)."""
    model = SessionModel(os.path.join(export_base, "1"))
    yield model
    model.close()


@pytest.fixture(scope="module")
def sampling(trained_run, tmp_path_factory):
    """An export that samples: temperature 1.5, top-k 8, top-p 0.95."""
    base = str(tmp_path_factory.mktemp("sampling") / "translator")
    path = export_run(
        trained_run["run"],
        base,
        max_output_length=MAX_LENGTH,
        sampling_temperature=1.5,
        sampling_topk=8,
        sampling_topp=0.95,
    )
    model = SessionModel(path)
    yield model
    model.close()


def test_top_k_one_samples_the_greedy_translation(shared):
    text = {"text": _strings(*SENTENCES)}
    sampled = shared.run("translate_sample", text)
    greedy = shared.run("translate_greedy", text)
    assert sampled["translation"].tolist() == greedy["translation"].tolist()
    np.testing.assert_array_equal(sampled["score"], greedy["score"])


def test_samples_are_new_on_every_request(sampling):
    text = {"text": _strings(*(SENTENCES[:2] * 8))}
    first, second = (sampling.run("translate_sample", text) for _ in range(2))
    assert first["translation"].tolist() != second["translation"].tolist()
    assert first["score"].dtype == np.float32 and np.all(first["score"] <= 0)


def test_score_of_the_greedy_translation_is_its_log_probability(shared):
    text = _strings(*SENTENCES[:2])
    greedy = shared.run("translate_greedy", {"text": text})
    scored = shared.run("score", {"text": text, "translation": greedy["translation"]})
    assert scored["log_prob"].dtype == np.float32 and scored["length"].dtype == np.int32
    # Only a translation that ended is one the search scored whole: one cut
    # at the maximum length (a tiny model may repeat a phrase until then,
    # as it does on some processors) is scored with an end token the search
    # never chose.
    ended = scored["length"] < MAX_LENGTH
    assert ended[0], "the short sentence's greedy translation should end"
    penalty = ((5.0 + scored["length"]) / 6.0) ** 0.6
    np.testing.assert_allclose(
        scored["log_prob"][ended], (greedy["score"] * penalty)[ended], atol=2e-4
    )


def test_a_likelier_translation_scores_higher(shared):
    text = _strings("The dog sleeps.", "The dog sleeps.")
    greedy = shared.run("translate_greedy", {"text": text[:1]})["translation"][0]
    scored = shared.run(
        "score", {"text": text, "translation": np.array([greedy, b"Haus Haus Haus"], object)}
    )
    assert scored["log_prob"][0] > scored["log_prob"][1]


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"text": _strings("a")}, r"missing \['translation'\]"),
        ({"text": _strings("a", "b"), "translation": _strings("x")}, "same number of rows"),
        (
            {"text": _strings("a"), "translation": np.array([[b"x"]], object)},
            "'translation' must have rank 1",
        ),
    ],
)
def test_bad_score_requests_are_refused(shared, inputs, message):
    with pytest.raises(SignatureError, match=message):
        shared.run("score", inputs)


def test_empty_and_invalid_utf8_are_scored(shared):
    scored = shared.run(
        "score",
        {
            "text": np.array([b"", b"caf\xe9"], object),
            "translation": np.array([b"", b"\xff\xfe"], object),
        },
    )
    assert np.all(np.isfinite(scored["log_prob"])) and scored["length"][0] == 1
