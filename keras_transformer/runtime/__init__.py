"""Runtime: what loads and runs an export, apart from what writes it.

`SessionModel` loads a SavedModel as TF Serving's C++ loader does; the
local translate and score of the command line, the persistent XLA cache,
and the readers of what an export records (its info, its warmup requests)
are here, for `serving`, `corpus` and the command line.

Names load on first use; importing the package checks the `serving` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "PREFIX_SIGNATURES": "signatures",
        "SIGNATURE_INPUTS": "signatures",
        "SIGNATURES": "signatures",
        "SessionModel": "session_model",
        "SignatureError": "session_model",
        "SignatureNotFound": "session_model",
        "read_export_info": "export_info",
        "read_warmup_requests": "warmup_records",
        "resolve_version_dir": "local",
        "score_with_savedmodel": "local",
        "translate_with_savedmodel": "local",
    },
    requires=(("tensorflow", "serving"), ("tensorflow_text", "serving")),
)
