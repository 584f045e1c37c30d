"""Version folders under a model's base path, read as TF Serving reads them.

One rule for the exporter (which picks the next version) and the server
(which serves them): a version folder's name is ASCII digits, a leading
zero allowed ("05" is version 5), within int64 (TF Serving's
`safe_strto64`).
"""

import os
import re

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
