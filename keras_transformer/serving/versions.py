"""The versions of one served model: discovered, loaded, swapped, unloaded."""

import ctypes
import ctypes.util
import logging
import os
import threading
import time

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2

from keras_transformer._validation import shown
from keras_transformer._version_folders import parse_version_folder, version_folders
from keras_transformer.runtime import xla_cache
from keras_transformer.runtime.export_info import read_export_info
from keras_transformer.runtime.session_model import SessionModel
from keras_transformer.runtime.warmup_records import read_warmup_requests
from keras_transformer.serving import collector
from keras_transformer.serving.batching import Batcher
from keras_transformer.serving.limits import RequestLimits, request_inputs
from keras_transformer.serving.options import check_labels, parse_version_labels

log = logging.getLogger("keras_transformer.serve")

__all__ = [
    "ModelManager",
    "Version",
    "check_labels",
    "empty_outputs",
    "parse_version_folder",
    "parse_version_labels",
    "version_folders",
]

State = get_model_status_pb2.ModelVersionStatus.State


def fingerprint(path):
    """Changes whenever any file under `path` is added, removed or written."""
    entries = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                stat = os.stat(full)
            except OSError:
                continue
            entries.append((os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


class Version:
    """A loaded version, with a batcher per signature and a use count.

    Loading replays the export's warmup records
    (`assets.extra/tf_serving_warmup_requests`) before the version serves,
    as TF Serving does, unless `warmup` is False (TF Serving's
    `--enable_model_warmup=false`); a record that fails fails the load.
    `warmed_up` counts the records replayed; `load_seconds` and
    `warmup_seconds` time the two parts (an XLA-compiled export compiles
    its programs in the second).
    With the XLA cache on (`xla_cache.enable`), `xla_programs_compiled`
    counts the programs of a compiled export that the warmup compiled
    rather than read from the cache.
    """

    def __init__(self, number, path, batching, session_config=None, warmup=True):
        self.number = number
        self.path = path
        start = time.monotonic()
        self.model = SessionModel(path, config=session_config)
        self.load_seconds = time.monotonic() - start
        self.xla_programs_compiled = None
        self.warmup_seconds = 0.0
        try:
            self.warmed_up = self._warm_up() if warmup else 0
        except Exception:
            self.model.close()
            raise
        collector.after_load()
        self.batching = batching
        self.batchers = {}
        self.lock = threading.Lock()
        self.active = 0
        self.retired = False

    def _warm_up(self):
        requests = read_warmup_requests(self.path)
        # The export's own records: checked for shape, not held to client limits.
        limits = RequestLimits(
            max_rows=1 << 30, max_string_bytes=1 << 30, max_request_bytes=1 << 30
        )
        cached = xla_cache.entries()
        start = time.monotonic()
        for request in requests:
            signature = request.model_spec.signature_name or "serving_default"
            inputs = request_inputs(request.inputs, self.model.signature(signature), limits)
            self.model.run(signature, inputs)
        self.warmup_seconds = time.monotonic() - start
        # A compiled version's warmup frees hundreds of MB of XLA's and
        # LLVM's working memory (about 440 MB of 2.5 GB for 24 programs of
        # the `small` model), which glibc would otherwise keep.
        _return_freed_memory()
        if requests:
            log.info("Warmed up version %s with %d requests in %.1f s", self.number,
                     len(requests), self.warmup_seconds)  # fmt: skip
        if cached is not None:
            self._report_xla_cache(cached, xla_cache.entries())
        return len(requests)

    def _report_xla_cache(self, before, after):
        """Says how many of a compiled version's programs its warmup
        compiled (each stored in the XLA cache, which held `before` entries
        then `after`) and how many it read back."""
        stored = after - before
        try:
            programs = read_export_info(self.path).get("programs")
        except (OSError, ValueError):
            programs = None
        if not isinstance(programs, int) or programs <= 0:
            return  # not a --jit-compile export
        if after == 0:
            log.warning(
                "Version %s: the XLA cache was not used (TensorFlow read TF_XLA_FLAGS before "
                "the cache was enabled: enable it before the process compiles anything)",
                self.number,
            )
            return
        self.xla_programs_compiled = stored
        log.info("Version %s: %d of its %d XLA programs compiled (and stored in the XLA "
                 "cache), the others read from it", self.number, stored, programs)  # fmt: skip

    def run(self, signature, inputs, alive=lambda: True, time_left=lambda: None,
            yielding=False):  # fmt: skip
        """Runs `signature` on checked `inputs`, batched with other requests
        (`Batcher.submit`).

        A request of no rows is answered with outputs of no rows, as the
        signature declares them, without running anything.
        """
        if len(next(iter(inputs.values()))) == 0:
            return empty_outputs(self.model.signature(signature))
        with self.lock:
            batcher = self.batchers.get(signature)
            if batcher is None:
                batcher = self.batchers[signature] = Batcher(
                    lambda x: self.model.run(signature, x), **self.batching
                )
        return batcher.submit(inputs, alive, time_left, yielding)

    def acquire(self):
        with self.lock:
            self.active += 1

    def release(self):
        with self.lock:
            self.active -= 1
            close = self.retired and self.active == 0
        if close:
            self._close()

    def retire(self):
        with self.lock:
            self.retired = True
            close = self.active == 0
        if close:
            self._close()

    def _close(self):
        for batcher in self.batchers.values():
            batcher.stop()
        self.batchers = {}
        self.model.close()
        self.model = None
        collector.after_unload()  # the graph and session go now, frozen or not
        _return_freed_memory()


def empty_outputs(signature_def):
    """`{name: array}` of no rows for each output of `signature_def`: its
    dtype, and its declared shape with 0 rows (and 0 for an unknown
    dimension)."""
    outputs = {}
    for name, info in signature_def.outputs.items():
        dims = [max(d.size, 0) for d in info.tensor_shape.dim][1:]
        dtype = tf.dtypes.as_dtype(info.dtype)
        numpy_dtype = object if dtype == tf.string else dtype.as_numpy_dtype
        outputs[name] = np.zeros([0, *dims], dtype=numpy_dtype)
    return outputs


def _return_freed_memory():
    """Gives freed memory back to the system: after a version's warmup
    (what compiling its XLA programs used) and after it is unloaded.

    A version's graph and session are freed by whichever threads made
    them (the watcher that loaded it, the servers that ran it), into
    glibc's per-thread arenas, which keep it: without this, each hot swap
    kept about one model's worth of memory. A no-op outside glibc.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


class ModelManager:
    """Loads and swaps the versions of one model under a base path.

    Args:
        base_path: directory of version folders (ASCII digits).
        name: the model name clients use.
        version_policy: `"latest"` (the newest version), `"all"`, or a
            list of version numbers (`specific`).
        poll_seconds: how often the base path is scanned; 0 disables it.
        batching: `Batcher` options (`max_batch_size`, `timeout`, `split`).
        version_labels: `{label: version}` that requests may name instead
            of a version (e.g. `{"stable": 1, "canary": 2}`).
        num_latest: how many of the newest versions `"latest"` serves.
        session_config: the `tf.compat.v1.ConfigProto` of every version's
            session; `None` takes TensorFlow's defaults.
        entry: the `ModelEntry` of a model config file it serves, if any.
        warmup: replay each version's warmup records before it serves.
    """

    def __init__(self, base_path, name, version_policy="latest", poll_seconds=2.0,
                 batching=None, version_labels=None, num_latest=1,
                 session_config=None, entry=None, warmup=True):  # fmt: skip
        self.entry = entry
        if not (version_policy in ("latest", "all") or isinstance(version_policy, (list, tuple))):
            raise ValueError(
                "`version_policy` must be latest, all or a list of versions. "
                f"Received: {version_policy!r}"
            )
        self.version_labels = check_labels(version_labels or {})
        if not os.path.isdir(base_path):
            raise FileNotFoundError(f"Model base path not found: {base_path}")
        self.base_path = base_path
        self.name = name
        self.version_policy = version_policy
        self.num_latest = num_latest
        self.session_config = session_config
        self.warmup = warmup
        self.batching = {"max_batch_size": 32, "timeout": 0.005}
        self.batching.update(batching or {})
        self.lock = threading.Lock()
        self.versions = {}  # number -> Version
        self.failed = {}  # number -> (fingerprint, error message)
        self.ended = set()  # unloaded after serving
        self._stop = threading.Event()
        self.refresh()
        self.watcher = None
        if poll_seconds:
            self.watcher = threading.Thread(target=self._watch, args=(poll_seconds,), daemon=True)
            self.watcher.start()

    def _on_disk(self):
        folders = version_folders(self.base_path)
        return {
            n: p for n, p in folders.items() if os.path.exists(os.path.join(p, "saved_model.pb"))
        }

    def _wanted(self, on_disk):
        """The versions the policy may serve, newest first."""
        newest_first = sorted(on_disk, reverse=True)
        if self.version_policy in ("all", "latest"):
            return newest_first
        return [n for n in newest_first if n in set(self.version_policy)]

    def refresh(self):
        """Loads new versions and unloads removed or superseded ones.

        Under `"latest"` the newest `num_latest` versions that load are
        served: a newer version that fails to load leaves the older one
        serving, as TF Serving's availability-preserving policy does.
        """
        on_disk = self._on_disk()
        serving = []
        for number in self._wanted(on_disk):
            if self.version_policy == "latest" and len(serving) == self.num_latest:
                break
            if number in self.versions:
                serving.append(number)
                continue
            stamp = fingerprint(on_disk[number])
            if number in self.failed and self.failed[number][0] == stamp:
                continue  # refused; retried once any file under it changes
            try:
                version = Version(
                    number, on_disk[number], self.batching, self.session_config, self.warmup
                )
            except Exception as error:
                self.failed[number] = (stamp, str(error).strip().splitlines()[-1][:2000])
                log.error("Refusing version %s of %s: %s", number, self.name, error)
                continue
            with self.lock:
                self.failed.pop(number, None)
                self.ended.discard(number)
                self.versions[number] = version
            serving.append(number)
            log.info("Serving version %s of %s", number, self.name)
        with self.lock:
            dropped = [v for n, v in self.versions.items() if n not in serving]
            for version in dropped:
                del self.versions[version.number]
                self.ended.add(version.number)
            for number in list(self.failed):
                if number not in on_disk:
                    del self.failed[number]
        for version in dropped:
            log.info("Unloading version %s of %s", version.number, self.name)
            version.retire()

    def _watch(self, poll_seconds):
        while not self._stop.wait(poll_seconds):
            try:
                self.refresh()
            except Exception:  # the watcher never dies; the models keep serving
                log.exception("Scanning %s failed", self.base_path)

    def relabel(self, entry):
        """Takes the labels of `entry`, a config entry serving the same
        versions, as the new config it came from is applied."""
        labels = check_labels(entry.labels)
        with self.lock:
            self.version_labels, self.entry = labels, entry

    def version_for_label(self, label):
        """The version a label names; `ValueError` for an unknown label."""
        labels = self.version_labels
        if label not in labels:
            raise ValueError(f"Unrecognized servable version label: {shown(label, quoted=False)}")
        return labels[label]

    def statuses(self):
        """`{version: (state, error message)}` of every version this server
        knows: served (AVAILABLE), unloaded (END), or refused (END with
        the load's error)."""
        with self.lock:
            result = {n: (State.AVAILABLE, "") for n in self.versions}
            result.update({n: (State.END, "") for n in self.ended if n not in result})
            result.update({n: (State.END, msg) for n, (_, msg) in self.failed.items()})
        return result

    def get(self, version=None):
        """The `Version` to serve (acquired: call `release` after use)."""
        with self.lock:
            if not self.versions:
                raise LookupError(f"Model {self.name} has no servable version")
            number = max(self.versions) if version is None else version
            if number not in self.versions:
                raise LookupError(
                    f"Version {number} of model {self.name} is not served; "
                    f"served: {sorted(self.versions)}"
                )
            servable = self.versions[number]
            servable.acquire()
            return servable

    def stop(self, wait_seconds=60.0):
        """Stops watching and unloads every version; the watcher thread
        has ended when this returns (unless it is busy loading for longer
        than `wait_seconds`)."""
        self._stop.set()
        if self.watcher is not None and self.watcher is not threading.current_thread():
            self.watcher.join(wait_seconds)
        with self.lock:
            versions = list(self.versions.values())
            self.versions = {}
        for version in versions:
            version.retire()
