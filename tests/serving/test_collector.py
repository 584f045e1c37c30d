"""`collector`: what versions loaded and unloaded after a server started
leave to Python's garbage collector, in a process that froze (as
`serve_forever` does) and in one that did not."""

import gc
import os
import weakref

import pytest

from keras_transformer.serving import collector
from keras_transformer.serving.versions import ModelManager
from tests.serving.conftest import copy_base, copy_version


@pytest.fixture
def unfrozen():
    """This process's collector as it was: nothing frozen, before and after."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def _tracked(thing):
    """Whether the collector scans `thing` (frozen objects are not listed)."""
    return any(other is thing for other in gc.get_objects())


@pytest.mark.parametrize("frozen", [True, False])
def test_a_swap_collects_the_old_version_and_freezes_the_new_where_frozen(
    serving_export, tmp_path, unfrozen, frozen
):
    base = copy_base(serving_export, tmp_path, warmup=False)
    manager = ModelManager(base, "translator", poll_seconds=0)
    try:
        first = weakref.ref(manager.versions[1].model.session.graph)
        if frozen:  # what serve_forever does once started
            collector.freeze_loaded()
            assert not _tracked(first())
        copy_version(os.path.join(base, "1"), os.path.join(base, "2"))
        manager.refresh()
        assert list(manager.versions) == [2]
        # Unloaded: its graph is gone at once, though it was frozen.
        assert first() is None
        # Loaded after the start: out of the collector's sight where the
        # process froze, and nothing frozen where it did not.
        assert _tracked(manager.versions[2].model.session.graph) is not frozen
        assert (gc.get_freeze_count() > 0) is frozen
    finally:
        manager.stop()


def test_a_process_that_froze_nothing_is_only_collected(unfrozen):
    class Cycle:
        pass

    cycle = Cycle()
    cycle.me = cycle
    gone = weakref.ref(cycle)
    del cycle
    collector.after_load()
    assert gc.get_freeze_count() == 0
    collector.after_unload()
    assert gone() is None and gc.get_freeze_count() == 0


def test_an_unload_collects_frozen_cycles_and_freezes_the_rest_again(unfrozen):
    class Cycle:
        pass

    kept, dropped = Cycle(), Cycle()
    kept.me, dropped.me = kept, dropped
    gone = weakref.ref(dropped)
    collector.freeze_loaded()
    del dropped
    gc.collect()
    assert gone() is not None  # frozen: a plain collection keeps it
    collector.after_unload()
    assert gone() is None
    assert gc.get_freeze_count() > 0 and not _tracked(kept)
