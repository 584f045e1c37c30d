"""Fixtures' folders built once for a whole test run, across pytest-xdist
workers."""

import os


def built_once(tmp_path_factory, name, build):
    """A folder that `build(path)` fills once for the whole run: with
    pytest-xdist, the first worker builds it and the others wait for it
    and read it (read-only fixtures only: the workers share it)."""
    import filelock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' base folders share this parent
    path, done = root / name, root / f"{name}.done"
    with filelock.FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            build(str(path))
            done.touch()
    return str(path)
