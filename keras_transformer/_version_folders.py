"""Version folders under a model's base path, read as TF Serving reads them.

One rule for every exporter (which picks the next version and writes it
into place with `write_version`) and the server (which serves them): a
version folder's name is ASCII digits, a leading zero allowed ("05" is
version 5), within int64 (TF Serving's `safe_strto64`).
"""

import os
import re
import shutil
import uuid

_VERSION_FOLDER = re.compile(r"[0-9]+")
MAX_VERSION = 2**63 - 1


def parse_version_folder(name):
    """The version number of folder `name`, or None if it is not one.

    Example:

    >>> parse_version_folder("05"), parse_version_folder("5a")
    (5, None)
    """
    if not _VERSION_FOLDER.fullmatch(name):
        return None
    number = int(name)
    return number if number <= MAX_VERSION else None


def check_version_number(version):
    """Raises a `ValueError` unless `version` is an int from 1 to
    `MAX_VERSION`: a version TF Serving's loader reads (a folder past int64
    is no version to it, and would never be served)."""
    if not isinstance(version, int) or isinstance(version, bool) or not 0 < version <= MAX_VERSION:
        raise ValueError(
            f"`version` must be a positive int of at most 2**63 - 1 ({MAX_VERSION}), "
            f"as TF Serving reads version folders. Received: version={version!r}"
        )


def version_folders(base_path):
    """`{version: path}` of the version folders under `base_path`; where
    two folders name one version ("5" and "05"), the one spelled without
    leading zeros wins.

    Raises:
        OSError: `base_path` cannot be listed (it does not exist, say).
    """
    found = {}
    for name in sorted(os.listdir(base_path), key=lambda n: (len(n), n), reverse=True):
        number = parse_version_folder(name)
        path = os.path.join(base_path, name)
        if number is not None and os.path.isdir(path):
            found[number] = path  # the shortest spelling comes last and wins
    return found


def versions(export_base):
    """The version numbers of the version folders under `export_base`,
    ascending, read as the server reads them (none if it does not exist)."""
    if not os.path.isdir(export_base):
        return []
    return sorted(version_folders(export_base))


def write_version(export_base, version, write):
    """Runs `write(folder)` into a staging folder beside `export_base/` and
    renames it to `export_base/<version>/` (default: the next free version),
    which must not exist; returns that path.

    A server watching `export_base` never sees a half-written version: the
    staging folder's name is no version, and the rename is atomic.
    """
    os.makedirs(export_base, exist_ok=True)
    if version is None:
        existing = versions(export_base)
        version = existing[-1] + 1 if existing else 1
        if version > MAX_VERSION:
            raise ValueError(
                f"{export_base} holds version {existing[-1]}, the last TF Serving reads: "
                "give the version to write"
            )
    check_version_number(version)
    final = os.path.join(export_base, str(version))
    if os.path.exists(final):
        raise FileExistsError(
            f"Version {version} already exists at {final}; versions are never overwritten"
        )
    staging = os.path.join(export_base, f".staging-{version}-{uuid.uuid4().hex[:8]}")
    try:
        write(staging)
        os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
