"""Python's garbage collector and the versions a server loads and unloads.

`serve_forever` moves what loading made (TensorFlow's, Keras' and the
models' objects) out of the collector's sight once it has started
(`freeze_loaded`): a full collection then scans what requests make, not
the whole process, and stops every thread for about a millisecond, not
0.4 s. Versions loaded and unloaded later keep to the same rule:

- `after_load` freezes a version just loaded, in a process that froze;
- `after_unload` collects an unloaded version at once. Frozen objects
  survive `gc.collect`: without unfreezing first, the graph of a version
  loaded before the start stayed alive for ever once it was unloaded.

In a process that froze nothing (a library user's own `start`), they
only collect. One lock keeps a load's freeze from landing between an
unload's unfreeze and its collection, which would freeze the garbage.

Example:

>>> import gc
>>> after_load()  # nothing frozen: nothing to do
>>> after_unload()
>>> gc.get_freeze_count()
0
"""

import gc
import threading

__all__ = ["after_load", "after_unload", "freeze_loaded"]

_lock = threading.Lock()


def freeze_loaded():
    """Collects, then freezes every object left (`gc.freeze`)."""
    with _lock:
        gc.collect()
        gc.freeze()


def after_load():
    """Freezes what loading a version made, where the process froze."""
    with _lock:
        if gc.get_freeze_count():
            gc.collect()
            gc.freeze()


def after_unload():
    """Collects what an unloaded version leaves now (its graph's
    reference cycles), frozen or not, and freezes the rest again where
    the process froze. A full collection: about 0.2-0.4 s once a swap."""
    with _lock:
        frozen = gc.get_freeze_count() > 0
        if frozen:
            gc.unfreeze()
        gc.collect()
        if frozen:
            gc.freeze()
