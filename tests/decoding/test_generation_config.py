"""`GenerationConfig`: every decoding default and check in one value."""

import dataclasses
import json

import pytest

from keras_transformer.decoding.generation_config import PENALTIES, GenerationConfig


def test_defaults_are_the_documented_ones():
    config = GenerationConfig()
    assert (config.beam_size, config.alpha, config.length_penalty) == (4, 0.6, "gnmt")
    assert (config.max_output_length, config.max_input_length) == (128, 256)
    assert (config.forced_end, config.renormalize, config.disable_unk) == (False, False, False)
    assert (config.sampling_temperature, config.sampling_topk, config.sampling_topp) == (1, 0, 1)
    assert config.suppress_sequences == () and PENALTIES == ("gnmt", "power")


def test_it_is_frozen_and_merges_only_what_is_given():
    config = GenerationConfig(beam_size=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.beam_size = 2
    merged = config.merged(alpha=1.0, beam_size=None, suppress_sequences=["das Haus"])
    assert (merged.beam_size, merged.alpha, merged.suppress_sequences) == (5, 1.0, ("das Haus",))
    assert config.alpha == 0.6  # the original is unchanged
    with pytest.raises(ValueError, match="Unknown generation setting.*beams"):
        config.merged(beams=3)


@pytest.mark.parametrize(
    "config",
    [
        GenerationConfig(),
        GenerationConfig(
            beam_size=1,
            alpha=-0.5,
            length_penalty="power",
            forced_end=True,
            renormalize=True,
            sampling_topk=5,
            sampling_topp=0.9,
            suppress_sequences=("Haus", "sehr gut"),
            disable_unk=True,
        ),  # fmt: skip
    ],
)
def test_json_round_trips(config, tmp_path):
    assert GenerationConfig.from_dict(config.to_dict()) == config
    path = tmp_path / "generation.json"
    config.write(path)
    assert GenerationConfig.read(path) == config
    assert json.loads(path.read_text())["suppress_sequences"] == list(config.suppress_sequences)


def test_a_missing_file_is_the_defaults_and_a_note_is_not_a_setting(tmp_path):
    assert GenerationConfig.read(tmp_path / "missing.json") == GenerationConfig()
    path = tmp_path / "generation.json"
    path.write_text('{"beam_size": 3, "ignored": {"no_repeat_ngram_size": 3}}')
    assert GenerationConfig.read(path).beam_size == 3


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"num_beams": 3}', "generation.json: unknown generation setting.*num_beams"),
        ('{"alpha": "high"}', "generation.json: `alpha` must be a finite number"),
        ("[1]", "a JSON object"),
        ("{", "is not a JSON file"),
    ],
)
def test_a_file_s_keys_are_checked_and_named(tmp_path, text, match):
    path = tmp_path / "generation.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        GenerationConfig.read(path)


@pytest.mark.parametrize(
    "values,match",
    [
        (dict(beam_size=0), "`beam_size` must be a positive int"),
        (dict(beam_size=2.5), "`beam_size` must be a positive int"),
        (dict(max_output_length=True), "`max_output_length` must be a positive int"),
        (dict(max_input_length=-1), "`max_input_length` must be a positive int"),
        (dict(alpha=float("nan")), "`alpha` must be a finite number"),
        (dict(length_penalty="linear"), "`length_penalty` must be one of"),
        (dict(forced_end=1), "`forced_end` must be true or false"),
        (dict(sampling_temperature=0), "`sampling_temperature` must be a finite number > 0"),
        (dict(sampling_topk=-1), "`sampling_topk` must be an int >= 0"),
        (dict(sampling_topp=1.5), r"`sampling_topp` must be in \(0, 1\]"),
        (dict(suppress_sequences="Haus"), "a list of phrases, not one string"),
        (dict(suppress_sequences=["Haus", ""]), "each phrase must be a non-blank string"),
        (dict(suppress_sequences=[3]), "each phrase must be a non-blank string"),
    ],
)
def test_bad_values_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        GenerationConfig(**values)


def test_every_field_is_documented():
    from keras_transformer._config_docs import attribute_docs

    assert set(attribute_docs(GenerationConfig)) == set(GenerationConfig.field_names())
