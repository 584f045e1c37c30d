"""The export under TensorFlow's C++ loader, the one TF Serving links."""

import os

import numpy as np
import pytest

from keras_transformer.decoding import Translator
from keras_transformer.runtime import SIGNATURE_INPUTS, SIGNATURES, SessionModel
from tests import cc_loader
from tests.export.exported import BEAM_SIZE, MAX_LENGTH

SENTENCES = [
    "The dog sleeps.",
    "A young woman reads the book because the children laugh.",
    "",
    "Die Straße ist naß — 3,5 km!",
]


@pytest.fixture(scope="session")
def binary():
    try:
        return cc_loader.build()
    except cc_loader.CcLoaderUnavailable as error:
        pytest.skip(f"TensorFlow's C++ loader cannot be built here: {error}")


@pytest.fixture(scope="module")
def version_dir(export_base):
    return os.path.join(export_base, "1")


@pytest.fixture(scope="module")
def session_model(version_dir):
    model = SessionModel(version_dir)
    yield model
    model.close()


TRANSLATIONS = ["Der Hund schläft.", "", "Eine Frau liest.", "x"]
PREFIXES = ["Der", "", "Ein Mann", ""]


@pytest.mark.parametrize("signature", SIGNATURES)
def test_every_signature_matches_the_python_session(binary, version_dir, session_model, signature):
    columns = {"text": SENTENCES, "translation": TRANSLATIONS, "target_prefix": PREFIXES}
    columns = {name: columns[name] for name in SIGNATURE_INPUTS[signature]}
    outputs, _ = cc_loader.run(binary, version_dir, signature, columns)
    expected = session_model.run(
        signature,
        {k: np.array([s.encode("utf-8") for s in v], dtype=object) for k, v in columns.items()},
    )
    assert sorted(outputs) == sorted(expected)
    for name, value in expected.items():
        assert outputs[name].shape == value.shape, name
        if value.dtype == object:
            assert outputs[name].tolist() == value.tolist(), name
        else:
            np.testing.assert_allclose(outputs[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


def test_translations_match_the_in_process_translator(binary, version_dir, trained_model):
    outputs, _ = cc_loader.run(binary, version_dir, "serving_default", SENTENCES)
    model, source, target = trained_model
    translator = Translator(
        model, source, target, beam_size=BEAM_SIZE, max_output_length=MAX_LENGTH
    )
    expected = translator.translate(SENTENCES)["translation"].numpy().tolist()
    assert outputs["translation"].tolist() == expected


def test_without_the_text_ops_the_load_fails_naming_the_op(binary, version_dir):
    with pytest.raises(cc_loader.CcLoadError, match="SentencepieceOp"):
        cc_loader.run(binary, version_dir, "serving_default", ["The dog sleeps."], libraries=[])


def test_rows_of_the_wrong_width_are_named(binary, version_dir):
    with pytest.raises(cc_loader.CcLoadError, match="has 1 fields; signature score takes 2"):
        cc_loader.run(binary, version_dir, "score", ["The dog sleeps."])
    with pytest.raises(ValueError, match="same number of rows"):
        cc_loader.run(binary, version_dir, "score", {"text": ["a", "b"], "translation": ["c"]})


def test_an_unknown_signature_is_named(binary, version_dir):
    with pytest.raises(cc_loader.CcLoadError, match="translate_everything"):
        cc_loader.run(binary, version_dir, "translate_everything", ["x"])


def test_no_compiler_is_a_clear_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(cc_loader.CcLoaderUnavailable, match="No C\\+\\+ compiler"):
        cc_loader.build(cache_dir=str(tmp_path / "cache"))


def test_the_build_is_cached(binary):
    assert cc_loader.build() == binary
    assert os.access(binary, os.X_OK)
