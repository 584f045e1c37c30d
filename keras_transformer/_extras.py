"""Imports of optional dependencies, with an error that says what to install."""

import importlib
import importlib.util

# The distribution on PyPI (`keras-transformer` there is another project
# that shares the import name `keras_transformer`).
DISTRIBUTION = "keras-transformer-nmt"
# Which extra of `setup.cfg` provides each optional module.
EXTRA_OF = {
    "tensorflow": "tensorflow",
    "tensorflow_text": "data",
    "tensorflow_datasets": "data",
    "sentencepiece": "data",
    "sacrebleu": "data",
    "yaml": "data",
    "psutil": "data",
    "grpc": "serving",
    "tensorflow_serving": "serving",
    "keras_tuner": "tuning",
    "matplotlib": "plots",
    "ctranslate2": "ctranslate2",
    "safetensors": "huggingface",
}


def require(module, extra=None):
    """Imports `module`, or raises an `ImportError` naming the pip command.

    Args:
        module: the module to import, e.g. `"tensorflow_text"`.
        extra: the extra that provides it; defaults to `EXTRA_OF`'s entry
            for the module's top-level package.

    Returns:
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = extra or EXTRA_OF.get(module.split(".")[0], "all")
        raise ImportError(
            f"{module} is not installed; it comes with keras_transformer's "
            f'"{extra}" extra: pip install "{DISTRIBUTION}[{extra}]"'
        ) from error


def check(module, extra=None):
    """Raises `require`'s `ImportError` unless `module` is installed; imports
    nothing (a package checks its optional stack this way when it is
    imported, and imports it when it is used)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules holds None for it
        found = False
    if not found:
        require(module, extra)  # raises, naming the extra
