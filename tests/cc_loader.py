"""TensorFlow's C++ SavedModel loader, the one TF Serving links, built here.

`build()` compiles `cc/run_saved_model.cc` with g++ against the installed
TensorFlow wheel (`libtensorflow_cc.so.2` and its headers), once per source
and TensorFlow version; `run()` loads an export with
`tensorflow::LoadSavedModel` (tag `serve`) after tensorflow-text's op
libraries, as a TF Serving build with TensorFlow Text has them, and runs one
signature. This is the loader TF Serving links; the `tensorflow_model_server`
binary itself is not run here.

Example:

>>> binary = build()
>>> outputs, latencies = run(binary, export_dir, "serving_default",
...                          ["The child takes the woman."])
>>> sorted(outputs), outputs["translation"].dtype
(['score', 'translation'], dtype('O'))
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import tensorflow as tf

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cc", "run_saved_model.cc")
_DTYPES = {"float": np.float32, "int32": np.int32, "int64": np.int64, "string": object}


class CcLoaderUnavailable(RuntimeError):
    """The C++ loader cannot be built here (no compiler, or no headers)."""


class CcLoadError(RuntimeError):
    """The C++ loader refused the export or failed to run it."""


def op_libraries():
    """tensorflow-text's op libraries, which TF Serving builds link."""
    import tensorflow_text

    ops_dir = os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops")
    return sorted(glob.glob(os.path.join(ops_dir, "_*.so")))


def _compiler():
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise CcLoaderUnavailable("No C++ compiler found (set CXX, or install g++)")


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras_transformer", "cc_loader")


def build(cache_dir=None):
    """Compiles the loader unless a build of this source and TensorFlow
    version is cached; returns the binary's path.

    Raises:
        CcLoaderUnavailable: no compiler, or the wheel lacks the C++ library.
    """
    lib_dir = tf.sysconfig.get_lib()
    if not os.path.exists(os.path.join(lib_dir, "libtensorflow_cc.so.2")):
        raise CcLoaderUnavailable(f"{lib_dir} has no libtensorflow_cc.so.2")
    compiler = _compiler()
    flags = tf.sysconfig.get_compile_flags()
    with open(SOURCE, "rb") as f:
        key = hashlib.sha256(f.read() + tf.__version__.encode() + " ".join(flags).encode())
    cache_dir = cache_dir or default_cache_dir()
    binary = os.path.join(cache_dir, f"run_saved_model-{key.hexdigest()[:16]}")
    if os.path.exists(binary):
        return binary
    os.makedirs(cache_dir, exist_ok=True)
    staging = tempfile.mktemp(dir=cache_dir, prefix=".build-")
    command = [
        compiler, *flags, "-O1", "-w", SOURCE, "-o", staging,
        # --no-as-needed keeps libtensorflow_cc, which registers the session
        # factory the loader needs, although no symbol of it is named.
        "-Wl,--no-as-needed", f"-L{lib_dir}", "-l:libtensorflow_cc.so.2",
        "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{lib_dir}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise CcLoaderUnavailable(f"Building the C++ loader failed:\n{result.stderr[-3000:]}")
    os.replace(staging, binary)  # atomic: a concurrent build never sees half a file
    return binary


def run(binary, export_dir, signature, sentences, repeats=1, libraries=None, timeout=600, log=None):
    """Runs `signature` of `export_dir` on `sentences` in the C++ loader.

    Args:
        binary: from `build()`.
        export_dir: a SavedModel version directory.
        signature: the signature to run.
        sentences: list of str, one row of the string input `text` each;
            or a dict of such lists by input name, for signatures of
            several inputs (`score`: `text` and `translation`). No
            newlines or tabs.
        repeats: how many times to run it; latencies are per run.
        libraries: op libraries to load first (default: `op_libraries()`).
        timeout: seconds.
        log: a list to append the loader's log lines to, logged with
            TensorFlow's info messages and XLA's compilations
            (`TF_CPP_VMODULE=device_compiler=1`); None logs warnings only.

    Returns:
        `(outputs, latencies_ms)`: NumPy arrays by output name (strings as
        bytes objects), and the latency of each run.

    Raises:
        CcLoadError: the load or the run failed; the message is the loader's.
    """
    columns = sentences if isinstance(sentences, dict) else {"text": sentences}
    names = sorted(columns)
    rows = list(zip(*(columns[name] for name in names)))
    if any(len(columns[name]) != len(rows) for name in names):
        raise ValueError(f"The inputs {names} must have the same number of rows")
    if any("\n" in s or "\t" in s for row in rows for s in row):
        raise ValueError("Rows are sent one a line, tab-separated: no newlines or tabs")
    libraries = op_libraries() if libraries is None else list(libraries)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if log is not None:
        env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="device_compiler=1")
    result = subprocess.run(
        [binary, export_dir, signature, str(repeats), *libraries],
        input="".join("\t".join(row) + "\n" for row in rows).encode("utf-8"),
        capture_output=True, env=env, timeout=timeout,
    )  # fmt: skip
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if log is not None:
        log.extend(lines)
    if result.returncode != 0:
        raise CcLoadError(lines[-1] if lines else f"exit code {result.returncode}")
    report = json.loads(result.stdout.decode("utf-8").strip().splitlines()[-1])
    outputs = {}
    for name, tensor in report["outputs"].items():
        dtype = _DTYPES[tensor["dtype"]]
        values = tensor["values"]
        if dtype is object:
            values = [v.encode("utf-8") for v in values]
        outputs[name] = np.array(values, dtype=dtype).reshape(tensor["shape"])
    return outputs, report["latency_ms"]
