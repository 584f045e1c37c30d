"""keras_transformer: Keras 3 layers and a servable Transformer for translation.

The layers, the model, the losses, the metrics and the schedules need Keras
alone and run on any Keras 3 backend; the rest are sub-packages with
optional dependencies (see `setup.cfg`'s extras): `data`, `training`,
`decoding`, `export`, `serving`, `tuning`.

Importing the package registers the Keras serializable objects and does
nothing else: it changes no file descriptor, stream or environment
variable. Whatever was imported first, `keras.saving.load_model` then
needs no `custom_objects` and no call of `register()`: with Keras already
imported, importing any part of the package registers every serializable
class at once; imported before Keras, the package loads nothing (a program
can still choose the Keras backend, as the command line does), and
registers every class as soon as Keras has been imported. Sub-packages
load their names on first use.
"""

import importlib.abc
import importlib.util
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


def _importing_ours():
    """Whether a module of this package is being imported right now (then
    the classes it needs are not all defined yet)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name.startswith("keras_transformer.")
    )


class _RegisterAfterKeras(importlib.abc.MetaPathFinder):
    """Registers the package's classes once `keras` has been imported, for a
    program that imported this package first (keras-hub, which imports
    Keras on import, has no such order to care about). One shot: it takes
    itself off `sys.meta_path` when `keras` is first looked for.

    Where Keras is first imported by one of this package's own modules
    (`from keras_transformer.layers import ...` before `import keras`),
    that module registers itself as it loads and `register()` the rest;
    registering from inside its import would meet it half-defined."""

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            if not _importing_ours():
                register()

        spec.loader.exec_module = exec_then_register
        return spec


if "keras" in sys.modules:
    register()
elif not any(isinstance(finder, _RegisterAfterKeras) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterKeras())

__all__ = [*_SUBMODULES, "__version__", "register"]
