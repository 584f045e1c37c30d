"""keras_transformer: Keras 3 layers and a servable Transformer for translation.

The layers, the model, the losses, the metrics and the schedules need Keras
alone and run on any Keras 3 backend; the rest are sub-packages with
optional dependencies (see `setup.cfg`'s extras): `data`, `training`,
`decoding`, `export`, `serving`, `tuning`.

Importing the package registers the Keras serializable objects and does
nothing else: it changes no file descriptor, stream or environment
variable. When Keras is already imported (`import keras` first, as import
sorting places it), importing any part of the package registers every
serializable class at once, so `keras.saving.load_model` needs no
`custom_objects`. Imported before Keras, the package loads nothing: a
program can still choose the Keras backend (`KERAS_BACKEND`), and the
names load, registering themselves, when first used. Sub-packages load
their names on first use too.
"""

import sys

__version__ = "0.1.0"

_SUBMODULES = ("layers", "losses", "metrics", "models", "schedules")
# Every module that registers serializable objects with Keras.
_REGISTERING = (
    "keras_transformer.layers",
    "keras_transformer.losses",
    "keras_transformer.metrics",
    "keras_transformer.models.transformer",
    "keras_transformer.schedules",
)


def _submodule(name):
    import importlib

    return importlib.import_module(f"keras_transformer.{name}")


def __getattr__(name):
    if name in _SUBMODULES:
        module = _submodule(name)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")


def register():
    """Registers every serializable class with Keras (imports Keras).

    `import keras_transformer` does it when Keras is already imported; a
    program that imports this package first calls it, or uses any of the
    package's layers or models, before `keras.saving.load_model`.
    """
    import importlib

    for module in _REGISTERING:
        importlib.import_module(module)


if "keras" in sys.modules:
    register()

__all__ = [*_SUBMODULES, "__version__", "register"]
