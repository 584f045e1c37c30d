"""The registry of formats: one `export_run`, each format a class by name."""

import json
import os

import pytest

from keras_transformer.export import ExportOptions, export_run
from keras_transformer.export.exporters import (
    _EXPORTERS,
    Exporter,
    exporter_names,
    get_exporter,
    register_exporter,
)


@pytest.fixture
def config_format():
    """A format of the test's own: the model's config and its vocabularies."""
    loads = []

    @register_exporter("config_test")
    class ConfigExporter(Exporter):
        def check(self, options):
            if options.generation.get("beam_size") == 7:
                raise ValueError("--beam-size 7: config_test refuses it")

        def export(self, run, output_dir, options):
            loads.append(run)
            os.makedirs(output_dir)
            with open(os.path.join(output_dir, "config.json"), "w", encoding="utf-8") as f:
                json.dump({"d_model": run.model.d_model,
                           "pieces": len(run.target_tokenizer.pieces()),
                           "run": run.path, "beam_size": options.generation_config().beam_size},
                          f)  # fmt: skip

    yield loads
    del _EXPORTERS["config_test"]


def test_the_built_in_formats_are_registered():
    assert exporter_names()[:3] == ("savedmodel", "ctranslate2", "huggingface")
    assert get_exporter("savedmodel").savedmodel_settings
    assert not get_exporter("ctranslate2").savedmodel_settings
    assert "int8" in get_exporter("ctranslate2").quantizations


def test_a_registered_format_exports_through_export_run(trained_run, trained_model, tmp_path,
                                                        config_format):  # fmt: skip
    base = str(tmp_path / "configs")
    first = export_run(trained_run["run"], base, format="config_test", beam_size=3)
    options = ExportOptions(run=trained_run["run"], export_base=base, format="config_test")
    second = export_run(options)
    assert [os.path.basename(p) for p in (first, second)] == ["1", "2"]
    with open(os.path.join(first, "config.json"), encoding="utf-8") as f:
        written = json.load(f)
    model, _, target = trained_model
    assert written == {"d_model": model.d_model, "pieces": len(target.pieces()),
                       "run": trained_run["run"], "beam_size": 3}  # fmt: skip
    # The run was loaded once an export, and handed whole to the exporter.
    assert len(config_format) == 2 and config_format[0].source_tokenizer is not None
    assert not [d for d in os.listdir(base) if d.startswith(".staging")]


def test_the_format_checks_its_settings_before_the_run_loads(tmp_path, config_format):
    with pytest.raises(ValueError, match="config_test refuses it"):
        export_run(str(tmp_path / "no-run"), str(tmp_path / "x"), format="config_test",
                   beam_size=7)  # fmt: skip
    assert config_format == [] and not os.path.exists(tmp_path / "x")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: get_exporter("onnx"), "`format` must be one of \\('savedmodel'"),
        (lambda: register_exporter("savedmodel")(Exporter), "registered already"),
        (lambda: export_run(ExportOptions(run="r", export_base="e"), "e"), "export base"),
    ],
)
def test_misuse_is_refused_in_one_line(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
    assert _EXPORTERS["savedmodel"] is not Exporter
