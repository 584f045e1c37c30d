"""Export: the servable SavedModel, its signatures and servability checks.

Names load on first use; importing the package checks the `serving` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "ExportOptions": "options",
        "NotServableError": "servability",
        "SIGNATURE_INPUTS": "signatures",
        "SIGNATURES": "signatures",
        "SessionModel": "session_model",
        "SignatureError": "session_model",
        "SignatureNotFound": "session_model",
        "check_servable": "servability",
        "export_ctranslate2": "ctranslate2",
        "export_ctranslate2_run": "ctranslate2",
        "export_run": "servable",
        "export_translator": "servable",
        "export_version": "servable",
        "versions": "servable",
    },
    requires=(("tensorflow", "serving"), ("tensorflow_text", "serving")),
)
