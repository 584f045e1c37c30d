"""`ExportOptions`: the export's settings, checked in one place."""

import dataclasses

import pytest

from keras_transformer.export.options import ExportOptions, check_compiled_shapes

REQUIRED = {"run": "runs/demo", "export_base": "exports/demo"}


def test_defaults_are_the_documented_ones():
    options = ExportOptions(**REQUIRED)
    assert (options.format, options.weights) == ("savedmodel", "auto")
    decoding = options.decoding()
    assert (decoding["beam_size"], decoding["alpha"], decoding["max_output_length"]) == (
        4,
        0.6,
        128,
    )
    assert (decoding["length_penalty"], decoding["forced_end"]) == ("gnmt", False)
    assert decoding["renormalize"] is False


def test_the_run_generation_settings_fill_what_the_options_leave_open():
    generation = {"beam_size": 6, "alpha": 1.0, "length_penalty": "power",
                  "max_output_length": 511, "forced_end": True, "renormalize": True}  # fmt: skip
    decoding = ExportOptions(**REQUIRED).decoding(generation)
    assert decoding["beam_size"] == 6 and decoding["length_penalty"] == "power"
    assert decoding["max_output_length"] == 511 and decoding["forced_end"] is True
    assert decoding["renormalize"] is True
    given = ExportOptions(**REQUIRED, beam_size=2, length_penalty="gnmt", forced_end=False,
                          renormalize=False)  # fmt: skip
    decoding = given.decoding(generation)
    assert (decoding["beam_size"], decoding["length_penalty"], decoding["forced_end"],
            decoding["renormalize"]) == (2, "gnmt", False, False)  # fmt: skip
    assert decoding["alpha"] == 1.0


def test_from_dict_round_trips_and_refuses_unknown_keys():
    options = ExportOptions(**REQUIRED, jit_compile=True, batch_sizes=[1, 4])
    assert ExportOptions.from_dict(dataclasses.asdict(options)) == options
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
        ({"format": "ctranslate2", "jit_compile": True}, "--jit-compile applies to --format"),
        ({"format": "ctranslate2", "lengths": [8]}, "--lengths applies to --format"),
        ({"quantization": "int8"}, "--quantization applies to --format ctranslate2"),
        # Decoding settings a format would have dropped silently.
        (
            {"format": "ctranslate2", "beam_size": 8, "alpha": 0.2},
            "--beam-size, --alpha: --format ctranslate2 keeps no decoding settings",
        ),
        ({"format": "ctranslate2", "forced_end": False}, "--forced-end: --format ctranslate2"),
        ({"format": "ctranslate2", "sampling_topk": 5}, "--sampling-topk: --format ctranslate2"),
        ({"format": "huggingface", "sampling_topp": 0.9}, "--sampling-topp applies to --format"),
        ({"format": "huggingface", "length_penalty": "gnmt"}, "generate\\(\\) has the power form"),
    ],
)
def test_bad_values_and_combinations_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        ExportOptions(**{**REQUIRED, **values})


def test_ctranslate2_takes_a_quantization():
    assert ExportOptions(**REQUIRED, format="ctranslate2", quantization="int8").quantization == (
        "int8"
    )


def test_split_batches_is_on_by_default_and_reaches_the_export():
    assert ExportOptions(**REQUIRED).decoding()["split_batches"] is True
    whole = ExportOptions(**REQUIRED, jit_compile=True, split_batches=False)
    assert whole.decoding()["split_batches"] is False


def test_the_python_export_checks_the_same_shapes():
    check_compiled_shapes(True, [1], [16])
    with pytest.raises(ValueError, match="shapes of `jit_compile=True`"):
        check_compiled_shapes(False, None, [16])
    with pytest.raises(ValueError, match="split_batches"):
        check_compiled_shapes(False, None, None, split_batches=False)


def test_huggingface_s_generation_is_the_run_s_under_the_flags():
    options = ExportOptions(**REQUIRED, format="huggingface", beam_size=6, alpha=-0.5,
                            length_penalty="power")  # fmt: skip
    run = {"beam_size": 4, "alpha": 1.0, "length_penalty": "power", "max_output_length": 23,
           "forced_end": True, "renormalize": True}  # fmt: skip
    assert options.generation(run) == {**run, "beam_size": 6, "alpha": -0.5}
    # A run trained here has none: the defaults of every export, then the flags.
    assert options.generation(None)["max_output_length"] == 128
    assert options.generation(None)["alpha"] == -0.5
