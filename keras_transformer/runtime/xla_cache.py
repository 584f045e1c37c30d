"""TensorFlow's persistent XLA cache, so that a restart need not compile.

A `--jit-compile` version compiles its XLA programs as it loads, in its
warmup replay: minutes for the default shapes (and each corpus worker
compiles those its batches run). TensorFlow can write what
XLA compiled into a directory and read it back in a later process
(`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR`, the same flag in
TF Serving). A restarted server, or a second one on the same kind of
machine, then loads each program instead of compiling it; TensorFlow still
lowers the graph to XLA to find and check the entry, which is what is left
of the load.

An entry is named by a fingerprint of its XLA program, but not by the
TensorFlow that compiled it nor by the processor it was compiled for. Read
by another TensorFlow it may not parse; compiled for a processor with
instructions this one lacks, it would crash. `enable` names both in the
prefix of every file it lets TensorFlow write, so that a directory shared
by machines or kept across upgrades holds apart what cannot be shared.

TensorFlow reads `TF_XLA_FLAGS` once, at its first XLA compilation: `enable`
must run before that, as `keras-transformer serve` does before it loads
any version and each worker of `keras-transformer corpus` before it loads
the export.
"""

import glob
import hashlib
import os
import platform
import re
import tempfile

__all__ = ["enable", "entries", "cache_prefix"]

_DIRECTORY_FLAG = "--tf_xla_persistent_cache_directory"
_PREFIX_FLAG = "--tf_xla_persistent_cache_prefix"

# What `enable` set in this process: (directory, prefix), or None.
_enabled = None


def _cpu_features():
    """The instructions this processor has, as one string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                # "flags" on x86, "Features" on Arm: what compiled code may use.
                if line.split(":")[0].strip() in ("flags", "Features"):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor()


def _processor():
    """This processor's architecture and a fingerprint of its instructions."""
    machine = platform.machine() or "cpu"
    digest = hashlib.sha256(f"{machine} {_cpu_features()}".encode()).hexdigest()
    return f"{machine}_{digest[:12]}"


def cache_prefix():
    """The prefix of the entries this TensorFlow writes on this processor,
    e.g. `keras_transformer_tf2.21.0_x86_64_3f5c0a1b2c3d`."""
    import tensorflow as tf

    version = re.sub(r"[^0-9A-Za-z.]", "_", tf.version.VERSION)
    return f"keras_transformer_tf{version}_{_processor()}"


def enable(directory):
    """Makes TensorFlow keep XLA's compiled programs in `directory`.

    Creates `directory` if needed, checks that it can be written (an entry
    that cannot be saved fails the compilation that made it), and adds
    the cache's flags to `TF_XLA_FLAGS`, keeping the flags already there.

    Args:
        directory: where the entries go; shared by the versions and models
            of a server, and by servers of the same kind of machine.

    Returns:
        The prefix of this process's entries.

    Raises:
        ValueError: `directory` cannot be used, or `TF_XLA_FLAGS` already
            names another cache directory.
    """
    global _enabled
    directory = os.path.abspath(os.path.expanduser(directory))
    if re.search(r"\s", directory):
        # TensorFlow splits TF_XLA_FLAGS at white space.
        raise ValueError(f"The XLA cache directory may not contain white space: {directory!r}")
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ValueError(
            f"The XLA cache directory {directory} cannot be written: {error.strerror or error}"
        ) from None
    flags = os.environ.get("TF_XLA_FLAGS", "")
    others = [
        path
        for path in re.findall(rf"{_DIRECTORY_FLAG}=(\S*)", flags)
        if os.path.abspath(path) != directory
    ]
    if others:
        raise ValueError(
            f"TF_XLA_FLAGS already names an XLA cache directory ({others[0]}), not "
            f"{directory}: give one or the other"
        )
    prefix = cache_prefix()
    kept = re.sub(rf"\s*({_DIRECTORY_FLAG}|{_PREFIX_FLAG})=\S*", "", flags).strip()
    ours = f"{_DIRECTORY_FLAG}={directory} {_PREFIX_FLAG}={prefix}"
    os.environ["TF_XLA_FLAGS"] = f"{kept} {ours}".strip()
    _enabled = (directory, prefix)
    return prefix


def entries():
    """How many entries of this process's prefix the cache holds; None
    when `enable` has not run."""
    if _enabled is None:
        return None
    directory, prefix = _enabled
    return len(glob.glob(os.path.join(glob.escape(directory), glob.escape(prefix) + "__*")))
