"""What a `--jit-compile` version costs to load: programs, compile time,
load plus warmup.

Exports the `small` model of `decode_latency.py` with `--jit-compile` and
its default shapes (or `--batch-sizes`, `--lengths`), then loads it in a
fresh process as a server does: the session, then every warmup record,
with XLA's compilation log on (`TF_CPP_VMODULE=device_compiler=1`). Prints
the program count the export declares, the compilations XLA logged, their
total time, the load and warmup times, and the memory of the loading
process (once loaded, and at its peak).

With `--xla-cache`, it loads the version twice, each time in a fresh
process as a restarted server would, with TensorFlow's persistent XLA
cache in a new folder (`keras-transformer serve --xla-cache-dir`): the
first load compiles and stores every program, the second reads them back.

    .venv/bin/python benchmarks/jit_load.py --data DIR [--batch-sizes 1,8,32] [--lengths ...]
        [--xla-cache]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from multi30k_data import add_data_argument

HERE = os.path.dirname(os.path.abspath(__file__))

# The server's own loading: the session, then the warmup replay.
_LOAD = """
import resource, sys
from keras_transformer.runtime import xla_cache
if len(sys.argv) > 2:
    xla_cache.enable(sys.argv[2])
from keras_transformer.serving.versions import Version
v = Version(1, sys.argv[1], batching={})
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
with open("/proc/self/status") as f:
    now = next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS:"))
print(f"RESULT {v.warmed_up} {v.load_seconds:.2f} {v.warmup_seconds:.2f} "
      f"{v.xla_programs_compiled} {peak} {now}", flush=True)
v.model.close()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    parser.add_argument("--batch-sizes", default=None, help="e.g. 1,8,32")
    parser.add_argument("--lengths", default=None, help="e.g. 16,32,64")
    parser.add_argument("--xla-cache", action="store_true",
                        help="load twice with a persistent XLA cache: cold, then warm")  # fmt: skip
    args = parser.parse_args()
    sys.path[:0] = [HERE, os.path.dirname(HERE)]
    import decode_latency

    from keras_transformer.export import export_version
    from keras_transformer.runtime.export_info import read_export_info

    def ints(text):
        return [int(v) for v in text.split(",")] if text else None

    base = tempfile.mkdtemp()
    try:
        model, source, target, _ = decode_latency.small_model(args.data)
        path = export_version(
            model, source, target, base, max_output_length=128, beam_size=4, check=False,
            jit_compile=True, batch_sizes=ints(args.batch_sizes), lengths=ints(args.lengths),
        )  # fmt: skip
        info = read_export_info(path)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "device_compiler=1",
               "PYTHONPATH": os.path.dirname(HERE)}  # fmt: skip
        cache = [os.path.join(base, "xla-cache")] if args.xla_cache else []
        print(f"shapes: batch sizes {info['batch_sizes']}, lengths {info['lengths']}")
        print(f"programs declared: {info['programs']}")
        for load in ("cold", "warm") if args.xla_cache else ("",):
            result = subprocess.run([sys.executable, "-c", _LOAD, path, *cache],
                                    capture_output=True, text=True, env=env)  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(result.stderr[-3000:])
            times = re.findall(r"Compilation of XLA executable time: .*?\((\d+) us\)",
                               result.stderr)  # fmt: skip
            seconds = sum(int(us) for us in times) / 1e6
            fields = result.stdout.strip().splitlines()[-1].split()
            _, requests, load_s, warmup_s, compiled, peak_mb, loaded_mb = fields
            label = f"{load} load, " if load else ""
            # XLA logs a program read from the cache as a compilation too.
            print(f"{label}XLA compilations logged at warmup: {len(times)}; their time: "
                  f"{seconds:.1f} s" + (f"; compiled, not read from the cache: {compiled}"
                                        if cache else ""))  # fmt: skip
            print(f"{label}warmup requests: {requests}; session load: {load_s} s; "
                  f"warmup replay (compiles included): {warmup_s} s; "
                  f"memory of the process: {loaded_mb} MB once loaded, {peak_mb} MB at its "
                  "peak")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
