import ctypes
import sys

import pytest

from keras_transformer.training import host_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_configures_glibc_and_is_idempotent():
    assert host_memory.retain_freed_memory() is True
    assert host_memory.retain_freed_memory() is True


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_noop_outside_linux(monkeypatch, platform):
    monkeypatch.setattr(host_memory.sys, "platform", platform)
    assert host_memory.retain_freed_memory() is False


def test_noop_without_mallopt(monkeypatch):
    def missing(*args, **kwargs):
        raise OSError("no libc")

    monkeypatch.setattr(host_memory.sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert host_memory.retain_freed_memory() is False


def test_refused_setting_is_reported(monkeypatch):
    class FakeLibc:
        @staticmethod
        def mallopt(option, value):
            return 0 if option == host_memory._M_MMAP_THRESHOLD else 1

    monkeypatch.setattr(host_memory.sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: FakeLibc())
    assert host_memory.retain_freed_memory() is False
