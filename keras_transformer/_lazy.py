"""Packages whose public names load on first use (PEP 562).

A sub-package lists its names and the modules that define them; `import
keras_transformer.training` then costs nothing, and `from
keras_transformer.training import train` loads the trainer alone. The
optional stacks a package needs are checked when it is imported, by
looking them up without importing them, so a missing one is still an
error that names the install command at once.
"""

import importlib
import sys
import types


def attach(package_globals, names, requires=()):
    """Makes the package whose globals are `package_globals` lazy.

    Args:
        package_globals: the package's `globals()`.
        names: `{public name: module}`, the module relative to the package.
        requires: `(module, extra)` pairs that must be installed.

    Returns:
        `(__getattr__, __dir__, __all__)` for the package to bind.
    """
    from keras_transformer import _extras

    for module, extra in requires:
        _extras.check(module, extra)
    package = package_globals["__name__"]

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        package_globals[name] = value  # later lookups find it directly
        return value

    def __dir__():
        return sorted(set(package_globals) | set(names))

    class _Package(types.ModuleType):
        def __setattr__(self, name, value):
            # A name exported from the module of the same name
            # (`decoding.beam_search`): importing that module, from
            # anywhere, makes the import system set the module over the
            # name. The package keeps the function, as an eager `from
            # .beam_search import beam_search` in `__init__` would.
            if (
                names.get(name) == name
                and isinstance(value, types.ModuleType)
                and value.__name__ == f"{package}.{name}"
                and hasattr(value, name)
            ):
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = _Package
    return __getattr__, __dir__, sorted(names)
