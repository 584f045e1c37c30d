"""`ExportOptions`: the export's settings, checked in one place."""

import dataclasses
import json

import pytest

from keras_transformer.decoding.generation_config import GenerationConfig
from keras_transformer.export.options import ExportOptions

REQUIRED = {"run": "runs/demo", "export_base": "exports/demo"}


def _options(**values):
    """Options as a `--config` file gives them: generation settings by name."""
    return ExportOptions.from_dict({**REQUIRED, **values})


def test_defaults_are_the_documented_ones():
    options = ExportOptions(**REQUIRED)
    assert (options.format, options.weights, options.generation) == ("savedmodel", "auto", {})


def test_the_run_generation_settings_fill_what_the_options_leave_open(tmp_path):
    generation = {"beam_size": 6, "alpha": 1.0, "length_penalty": "power",
                  "max_output_length": 511, "forced_end": True, "renormalize": True,
                  "ignored": {"no_repeat_ngram_size": 3}}  # fmt: skip
    (tmp_path / "generation.json").write_text(json.dumps(generation))
    config = _options(run=str(tmp_path)).generation_config()
    assert config == GenerationConfig.from_dict(generation)
    assert (config.beam_size, config.length_penalty, config.max_output_length) == (6, "power", 511)
    given = _options(run=str(tmp_path), beam_size=2, length_penalty="gnmt", forced_end=False,
                     renormalize=False, suppress_sequences=["das Haus"])  # fmt: skip
    config = given.generation_config()
    assert (config.beam_size, config.length_penalty, config.forced_end,
            config.renormalize) == (2, "gnmt", False, False)  # fmt: skip
    assert config.alpha == 1.0 and config.suppress_sequences == ("das Haus",)
    # A run trained here has none: the defaults, then the flags.
    assert _options(run=str(tmp_path / "none")).generation_config() == GenerationConfig()


def test_a_run_s_bad_generation_json_is_named(tmp_path):
    (tmp_path / "generation.json").write_text(json.dumps({"beam_size": 0}))
    with pytest.raises(ValueError, match="generation.json: `beam_size` must be a positive int"):
        _options(run=str(tmp_path)).generation_config()


def test_from_dict_round_trips_and_refuses_unknown_keys():
    options = ExportOptions(**REQUIRED, jit_compile=True, batch_sizes=[1, 4],
                            generation={"beam_size": 2})  # fmt: skip
    assert ExportOptions.from_dict(dataclasses.asdict(options)) == options
    assert _options(jit_compile=True, batch_sizes=[1, 4], beam_size=2) == options
    with pytest.raises(ValueError, match="Unknown export option.*beams"):
        ExportOptions.from_dict({**REQUIRED, "beams": 3})


@pytest.mark.parametrize("text,expected", [("1,8,32", [1, 8, 32]), ([2, 4], [2, 4]), (None, None)])
def test_batch_sizes_read_as_the_command_line_gives_them(text, expected):
    options = ExportOptions(**REQUIRED, jit_compile=text is not None, batch_sizes=text)
    assert options.batch_sizes == expected


@pytest.mark.parametrize(
    "values,match",
    [
        ({"run": None}, "--run"),
        ({"export_base": ""}, "--export-base"),
        ({"format": "onnx"}, "format"),
        ({"weights": "latest"}, "weights"),
        ({"version": 0}, "version"),
        # Past int64, TF Serving reads no version from the folder's name.
        ({"version": 2**63}, r"`version` must be a positive int of at most 2\*\*63 - 1"),
        ({"beam_size": 0}, "beam_size"),
        # A config file's 2.5 was read as 2 beams.
        ({"beam_size": 2.5}, "`beam_size` must be a positive int. Received: beam_size=2.5"),
        ({"max_output_length": 16.0}, "`max_output_length` must be a positive int"),
        ({"max_output_length": 0}, "max_output_length"),
        ({"alpha": float("inf")}, "`alpha` must be a finite number. Received"),
        ({"alpha": float("-inf")}, "`alpha` must be a finite number"),
        ({"alpha": float("nan")}, "`alpha` must be a finite number"),
        ({"alpha": "0.6"}, "`alpha` must be a finite number"),
        ({"length_penalty": "linear"}, "length_penalty"),
        ({"sampling_topp": 0.0}, "sampling_topp"),
        ({"sampling_temperature": 0.0}, "sampling_temperature"),
        ({"sampling_temperature": float("inf")}, "`sampling_temperature` must be a finite"),
        ({"sampling_topk": -1}, "`sampling_topk` must be an int >= 0"),
        ({"jit_compile": True, "batch_sizes": "1,x"}, "positive ints"),
        ({"lengths": [16]}, "shapes of `jit_compile=True`"),
        ({"split_batches": False}, "shapes of `jit_compile=True`"),
        (
            {"format": "ctranslate2", "jit_compile": True},
            "--jit-compile does not apply to --format ctranslate2",
        ),
        (
            {"format": "ctranslate2", "lengths": [8]},
            "--lengths does not apply to --format ctranslate2",
        ),
        ({"quantization": "int8"}, "--quantization int8: --format savedmodel takes none"),
        # Decoding settings a format would have dropped silently.
        (
            {"format": "ctranslate2", "beam_size": 8, "alpha": 0.2},
            "--beam-size, --alpha: --format ctranslate2 keeps no decoding settings",
        ),
        ({"format": "ctranslate2", "forced_end": False}, "--forced-end: --format ctranslate2"),
        ({"format": "ctranslate2", "sampling_topk": 5}, "--sampling-topk: --format ctranslate2"),
        ({"format": "huggingface", "sampling_topp": 0.9}, "--sampling-topp applies to --format"),
        ({"format": "huggingface", "length_penalty": "gnmt"}, "generate\\(\\) has the power form"),
        ({"suppress_sequences": "das Haus"}, "a list of phrases, not one string"),
        ({"suppress_sequences": ["  "]}, "each phrase must be a non-blank string"),
        ({"disable_unk": "yes"}, "`disable_unk` must be true or false"),
        ({"generation": {"beams": 2}}, "Unknown generation setting.*beams"),
    ],
)
def test_bad_values_and_combinations_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        _options(**values)


def test_ctranslate2_takes_a_quantization():
    assert ExportOptions(**REQUIRED, format="ctranslate2", quantization="int8").quantization == (
        "int8"
    )


def test_split_batches_is_on_by_default():
    assert ExportOptions(**REQUIRED).split_batches is True
    assert ExportOptions(**REQUIRED, jit_compile=True, split_batches=False).split_batches is False


def test_huggingface_takes_the_constraints_generate_has():
    options = _options(format="huggingface", beam_size=6, alpha=-0.5, length_penalty="power",
                       suppress_sequences=["Haus"], disable_unk=True)  # fmt: skip
    assert options.generation["suppress_sequences"] == ["Haus"]
