"""Export: the servable SavedModel, its signatures and servability checks."""

from keras_transformer import _extras

_extras.require("tensorflow", "serving")
_extras.require("tensorflow_text", "serving")

from keras_transformer.export.servability import NotServableError, check_servable
from keras_transformer.export.servable import (
    SIGNATURE_INPUTS,
    SIGNATURES,
    export_run,
    export_translator,
    export_version,
    versions,
)
from keras_transformer.export.session_model import SessionModel, SignatureError, SignatureNotFound

__all__ = [
    "NotServableError",
    "SIGNATURE_INPUTS",
    "SIGNATURES",
    "SessionModel",
    "SignatureError",
    "SignatureNotFound",
    "check_servable",
    "export_run",
    "export_translator",
    "export_version",
    "versions",
]
