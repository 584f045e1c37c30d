"""Export: the writers of every format, one registry of them (`export_run`),
and the servability checks. What loads and runs an export is
`keras_transformer.runtime`.

Names load on first use; importing the package checks the `serving` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "ExportOptions": "options",
        "Exporter": "exporters",
        "LoadedRun": "exporters",
        "NotServableError": "servability",
        "check_servable": "servability",
        "export_ctranslate2": "ctranslate2",
        "export_marian": "marian",
        "export_run": "export_run",
        "export_translator": "servable",
        "export_version": "servable",
        "exporter_names": "exporters",
        "get_exporter": "exporters",
        "register_exporter": "exporters",
    },
    requires=(("tensorflow", "serving"), ("tensorflow_text", "serving")),
)
