"""Soak of `keras-transformer serve`: good clients alone, then beside attackers.

Usage (from the repository root, after `make demo` or any export):

    .venv/bin/python benchmarks/serve_load.py --model-base-path exports/demo \\
        --clients 16 --clean-seconds 120 --seconds 600

Starts the server in a subprocess on free loopback ports (gRPC and REST),
serving the export through a model config file, and runs two phases:
`clean`, `--clients` good gRPC clients alone for `--clean-seconds`; then
`attack`, the same good clients for `--seconds` beside one thread of each
attack class (`--attackers` threads each):

- `hostile`: requests that lie about their shape, too many rows, oversized
  strings, the wrong dtype, and large requests that give up after 0.2 s;
- `empty`: gRPC tensors of shape [0] and REST `{"instances": []}`;
- `slow rest`: connections that send half a body and stall;
- `abandoned rest`: large REST requests whose client leaves after 0.5 s;
- `label flood`: requests to invented model, version and signature
  names, over gRPC and REST, and a metrics scrape now and then;
- `config churn`: the model config file rewritten every 2 s, in turn
  with changed labels and with a base path that does not exist (refused);
- `deadline`: 1-row requests with a 5 s deadline, answered in time;
- `expiring flood`: `--flood-clients` clients on connections of their own,
  from a process of their own (`tests/serving/flood.py`), sending 4-row
  requests with 1 ms deadlines, which expire on arrival or in flight;
- `cancelling flood`: the same clients cancelling 8-row requests after
  0-20 ms.

`--attacks` picks the classes (default: all): `--attacks "expiring flood"
--clients 1 --flood-clients 64` is one well-behaved client beside 64
flooding ones. `--server-cpus 0 --flood-cpus 1` pins the server (and this
process, the good clients) and the flood processes to CPUs of their own,
in both phases: the flood then takes no CPU from the server, as when the
flooding clients are other machines. `--server-nice N` starts the server
`N` nice steps from this process's priority (a negative `N`, above the
flood's, needs root), as an operator gives a server priority over the
other processes of its machine. `--cgroups` (root, Linux) starts the
server and the flood processes each in a CPU cgroup of its own, of equal
weight, as two containers of one machine are by default (Docker's
`cpu.shares` of 1024): the kernel then shares the CPUs between the two
groups, not between their threads.

Prints, per phase, the good requests' count, errors, p50/p99 latency and
sentences per second; the attack requests by class and status; the server's
resident memory and thread count averaged over each minute, and whether
they stayed within 10% from the second minute to the last. Exits 1 if any
good request failed.
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import grpc  # noqa: E402
import psutil  # noqa: E402
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402
from tensorflow_serving.apis import predict_pb2  # noqa: E402

from keras_transformer.data.synthetic import generate_pairs  # noqa: E402
from keras_transformer.serving.grpc_client import GrpcTranslationClient  # noqa: E402

CONFIG = """model_config_list {{
  config {{ name: "translator" base_path: "{base}"
           version_labels {{ key: "stable" value: {version} }} }}{extra}
}}
"""
# The deadline of the deadline-bound requests: ten times a good request's p99.
DEADLINE_SECONDS = 5.0
REFUSED = '\n  config { name: "ghost" base_path: "/no/such/folder" }'


def _tensor(dims, values, dtype=types_pb2.DT_STRING):
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
    )
    if dtype == types_pb2.DT_STRING:
        return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, string_val=values)
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, int_val=values)


def _request(tensor, name="translator", signature="", version=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    request.inputs["text"].CopyFrom(tensor)
    return request.SerializeToString()


class _Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies, self.errors, self.sentences = [], [], 0
        self.attacks = {}

    def count(self, kind, code):
        with self.lock:
            self.attacks[(kind, code)] = self.attacks.get((kind, code), 0) + 1

    def percentile(self, q):
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _pinned(command, cpus):
    """`command` run on the CPUs `cpus` (e.g. "0,1"), or anywhere if None;
    every thread it starts inherits them."""
    return command if cpus is None else ["taskset", "--cpu-list", cpus, *command]


class _CpuGroups:
    """`--cgroups`: a CPU cgroup per name, each of the default weight, under
    cgroup v2 where its `cpu` controller is on, else cgroup v1's `cpu`
    hierarchy; `enter(name)` moves the calling process into one (for a
    child's `preexec_fn`); `remove()` deletes them once their processes
    have exited, and names any it cannot."""

    def __init__(self, names):
        v2, v1 = "/sys/fs/cgroup", "/sys/fs/cgroup/cpu"
        try:
            with open(os.path.join(v2, "cgroup.subtree_control")) as f:
                root = v2 if "cpu" in f.read().split() else v1
        except OSError:
            root = v1
        if not os.path.isfile(os.path.join(root, "cgroup.procs")):
            raise SystemExit(f"--cgroups: no CPU cgroup hierarchy at {root}")
        self.paths = {n: os.path.join(root, f"kt_serve_load_{os.getpid()}_{n}") for n in names}
        for path in self.paths.values():
            try:
                os.mkdir(path)
            except OSError as error:
                raise SystemExit(f"--cgroups: cannot create {path}: {error.strerror}") from None

    def enter(self, name):
        with open(os.path.join(self.paths[name], "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        # A process leaves its group as it exits: once the server and the
        # floods are waited for, their groups are empty. One still busy
        # (a server that would not stop) is named, not waited on.
        for path in self.paths.values():
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as error:
                print(f"--cgroups: {path} is left: {error.strerror}", file=sys.stderr)


def _preexec(nice=0, groups=None, group=None):
    """What a child runs before its program: its nice steps, its cgroup."""
    if not nice and groups is None:
        return None

    def run():
        if groups is not None:
            groups.enter(group)
        if nice:
            os.nice(nice)

    return run


class _Server:
    def __init__(self, base, workdir, rest_timeout_ms, cpus=None, flags=(), nice=0, groups=None):
        self.base = os.path.abspath(base)
        self.groups = groups  # with --cgroups, the flood processes enter theirs
        self.config = os.path.join(workdir, "models.config")
        self.write_config(version=1)
        self.grpc_port, self.rest_port = _free_port(), _free_port()
        command = [
            sys.executable, "-m", "keras_transformer.cli", "serve",
            "--model-config-file", self.config, "--model-config-file-poll-wait-seconds", "1",
            "--port", str(self.grpc_port), "--rest-api-port", str(self.rest_port),
            "--rest-api-timeout-in-ms", str(rest_timeout_ms), "--poll-seconds", "0", *flags,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            _pinned(command, cpus), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # In the child before it runs: a priority it may not take fails here, loudly.
            preexec_fn=_preexec(nice, groups, "server"),
        )  # fmt: skip
        for line in self.process.stdout:
            if line.startswith("READY"):
                break
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.psutil = psutil.Process(self.process.pid)

    def write_config(self, version, refused=False):
        text = CONFIG.format(base=self.base, version=version, extra=REFUSED if refused else "")
        with open(self.config + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.config + ".tmp", self.config)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=120)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _good(server, sentences, tally, stop, seed, period=0.0):
    """A good client: one sentence a request, the next sent `period`
    seconds after the last was (0: as soon as it is answered)."""
    rng = random.Random(seed)
    with GrpcTranslationClient(f"127.0.0.1:{server.grpc_port}", "translator", timeout=120) as c:
        while not stop.is_set():
            start = time.monotonic()
            try:
                c.translate([rng.choice(sentences)])
            except Exception as error:  # counted, reported
                with tally.lock:
                    tally.errors.append(repr(error)[:300])
            else:
                with tally.lock:
                    tally.latencies.append(time.monotonic() - start)
                    tally.sentences += 1
            stop.wait(max(0.0, period - (time.monotonic() - start)))


def _grpc_attacks(kind, requests):
    """An attacker that sends `requests` ((request bytes, timeout, must succeed)) in turn."""

    def attack(server, sentences, tally, stop, seed):
        rng = random.Random(seed)
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            predict = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
            while not stop.is_set():
                request, timeout = rng.choice(requests(sentences, rng))
                try:
                    predict(request, timeout=timeout)
                    code = "OK"
                except grpc.RpcError as error:
                    code = error.code().name
                tally.count(kind, code)

    return attack


def _hostile(sentences, rng):
    long = [s.encode() for s in sentences[:300]]
    return [
        (_request(_tensor([5000, 5000], [b"x"])), 30),
        (_request(_tensor([300], [])), 30),
        (_request(_tensor([5000], [b"x"] * 5000)), 30),
        (_request(_tensor([1], [b"y" * 40000])), 30),
        (_request(_tensor([2], [1, 2], dtype=types_pb2.DT_INT32)), 30),
        (_request(_tensor([len(long)], long)), 0.2),
    ]


def _empty_grpc(sentences, rng):
    return [(_request(_tensor([0], []), signature=s), 30)
            for s in ("", "translate_greedy", "translate_nbest")]  # fmt: skip


def _flood_grpc(sentences, rng):
    word = f"{rng.getrandbits(64):x}"
    one = _tensor([1], [b"x"])
    return [
        (_request(one, name=f"model-{word}"), 30),
        (_request(one, signature=f"sig-{word}"), 30),
        (_request(one, version=rng.getrandbits(40) + 10), 30),
    ]


def _deadline(sentences, rng):
    return [(_request(_tensor([1], [rng.choice(sentences).encode()])), DEADLINE_SECONDS)]


def _process_flood(mode):
    """An attack class: `tests/serving/flood.py` in a process of its own,
    `--flood-clients` connections, until the phase ends."""

    def attack(server, sentences, tally, stop, seed):
        flood = subprocess.Popen(
            _pinned([sys.executable, "-m", "tests.serving.flood", f"127.0.0.1:{server.grpc_port}",
                     mode, str(server.flood_clients), "100000"], server.flood_cpus),
            stdout=subprocess.PIPE, text=True, cwd=REPO,
            preexec_fn=_preexec(groups=server.groups, group="flood"),
        )  # fmt: skip
        stop.wait()
        flood.terminate()
        lines = flood.communicate(timeout=60)[0].strip().splitlines()
        if not lines or not lines[-1].startswith("{"):  # stopped while importing
            print(f"{mode} flood: stopped before it reported its counts (exit "
                  f"{flood.returncode}); a longer --seconds lets it start",
                  file=sys.stderr)  # fmt: skip
            return
        for code, n in json.loads(lines[-1]).items():
            with tally.lock:
                tally.attacks[(f"{mode} flood", code)] = n

    return attack


def _rest(server, method, path, body=None, timeout=30):
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.rest_port}{path}", data=body, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return str(response.status)
    except urllib.error.HTTPError as error:
        error.read()
        return str(error.code)
    except OSError as error:
        return type(error).__name__


def _rest_attacks(server, sentences, tally, stop, seed):
    """Empty REST requests, invented names, and a metrics scrape now and then."""
    rng = random.Random(seed)
    while not stop.is_set():
        word = f"{rng.getrandbits(64):x}"
        choice = rng.randrange(4)
        if choice == 0:
            body = json.dumps({"instances": []}).encode()
            tally.count("empty", "rest " + _rest(server, "POST", "/v1/models/translator:predict",
                                                 body))  # fmt: skip
        elif choice == 1:
            body = json.dumps({"instances": ["x"]}).encode()
            code = _rest(server, "POST", f"/v1/models/m-{word}:predict", body)
            tally.count("label flood", "rest " + code)
        elif choice == 2:
            body = json.dumps({"signature_name": f"s-{word}", "instances": ["x"]}).encode()
            code = _rest(server, "POST", "/v1/models/translator:predict", body)
            tally.count("label flood", "rest " + code)
        else:
            tally.count(
                "label flood", "scrape " + _rest(server, "GET", "/monitoring/prometheus/metrics")
            )
            time.sleep(0.5)


def _slow_rest(server, sentences, tally, stop, seed):
    """Connections that send half a body and stall, 8 at a time."""
    while not stop.is_set():
        held = []
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=30)
            sock.sendall(b"POST /v1/models/translator:predict HTTP/1.1\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"instances\": [\"The")  # fmt: skip
            held.append(sock)
        for sock in held:  # the server closes each after its timeout
            try:
                closed = sock.recv(1024) == b""
            except OSError:
                closed = True
            tally.count("slow rest", "closed by server" if closed else "answered")
            sock.close()


def _abandoned_rest(server, sentences, tally, stop, seed):
    """Large REST requests whose client leaves after 0.5 s."""
    body = json.dumps({"instances": sentences[:400]}).encode()
    while not stop.is_set():
        sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=30)
        sock.sendall(b"POST /v1/models/translator:predict HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
                     % len(body) + body)  # fmt: skip
        time.sleep(0.5)
        sock.close()
        tally.count("abandoned rest", "left")
        time.sleep(0.5)


def _config_churn(server, sentences, tally, stop, seed):
    version = 1
    while not stop.wait(2.0):
        refused = version % 2 == 0
        server.write_config(version=version % 3, refused=refused)
        tally.count("config churn", "refused file" if refused else "labels changed")
        version += 1
    server.write_config(version=1)


ATTACKS = {
    "hostile": _grpc_attacks("hostile", _hostile),
    "empty": _grpc_attacks("empty", _empty_grpc),
    "label flood": _grpc_attacks("label flood", _flood_grpc),
    "deadline": _grpc_attacks("deadline", _deadline),
    "rest": _rest_attacks,
    "slow rest": _slow_rest,
    "abandoned rest": _abandoned_rest,
    "config churn": _config_churn,
    "expiring flood": _process_flood("expired"),
    "cancelling flood": _process_flood("cancelled"),
}


def _phase(server, sentences, clients, attackers, seconds, attacks=tuple(ATTACKS), period=0.0):
    tally, stop = _Tally(), threading.Event()
    threads = [threading.Thread(target=_good, args=(server, sentences, tally, stop, i, period))
               for i in range(clients)]  # fmt: skip
    for name in attacks if attackers else ():
        attack = ATTACKS[name]
        count = 1 if name in ("config churn", "expiring flood", "cancelling flood") else attackers
        threads += [threading.Thread(target=attack, args=(server, sentences, tally, stop, 100 + i),
                                     daemon=True) for i in range(count)]  # fmt: skip
    samples = []  # (seconds since start, rss, threads)
    began = time.monotonic()
    for thread in threads:
        thread.start()
    while time.monotonic() - began < seconds:
        time.sleep(1.0)
        samples.append((time.monotonic() - began, server.psutil.memory_info().rss,
                        server.psutil.num_threads()))  # fmt: skip
    stop.set()
    for thread in threads:
        thread.join(120)
    tally.elapsed = time.monotonic() - began
    tally.samples = samples
    return tally


def _cpu_list(text):
    """The CPUs of a list such as "0,2-3"."""
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _per_minute(samples):
    """Means of RSS and threads over each whole minute of the phase."""
    minutes = {}
    whole = int(samples[-1][0] // 60) if samples else 0
    for at, rss, threads in samples:
        if int(at // 60) < whole:  # the last, partial minute is the wind-down
            minutes.setdefault(int(at // 60), []).append((rss, threads))
    return {m: (sum(r for r, _ in v) / len(v), sum(t for _, t in v) / len(v))
            for m, v in sorted(minutes.items())}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-base-path", default="exports/demo")
    parser.add_argument("--clients", type=int, default=16, help="good clients")
    parser.add_argument("--attackers", type=int, default=1, help="threads per attack class")
    parser.add_argument("--clean-seconds", type=float, default=60.0)
    parser.add_argument("--seconds", type=float, default=600.0, help="length of the attack")
    parser.add_argument("--rest-timeout-ms", type=int, default=3000)
    parser.add_argument(
        "--attacks",
        type=lambda text: text.split(","),
        default=list(ATTACKS),
        help=f"attack classes, comma-separated, of: {', '.join(ATTACKS)}",
    )
    parser.add_argument(
        "--flood-clients", type=int, default=64, help="connections of each flood class"
    )
    parser.add_argument("--good-period", type=float, default=0.0,
                        help="seconds from one good request to the next; 0 sends each as "
                        "soon as the last is answered")  # fmt: skip
    parser.add_argument("--workdir", default=None, help="where the model config file goes")
    parser.add_argument("--server-cpus", help="CPUs of the server and good clients, e.g. 0")
    parser.add_argument("--flood-cpus", help="CPUs of the flood processes, e.g. 1")
    parser.add_argument("--server-nice", type=int, default=0,
                        help="nice steps of the server from this process's priority; "
                        "negative needs root")  # fmt: skip
    parser.add_argument("--cgroups", action="store_true",
                        help="the server and the floods each in a CPU cgroup of its own, "
                        "of equal weight, as two containers (root, Linux)")  # fmt: skip
    parser.add_argument("--serve-flags", type=str.split, default=[],
                        help="more flags of `keras-transformer serve`, in one string")  # fmt: skip
    args = parser.parse_args()
    unknown = sorted(set(args.attacks) - set(ATTACKS))
    if unknown:
        parser.error(f"unknown attack classes: {unknown}; choose from {list(ATTACKS)}")

    import tempfile

    workdir = args.workdir or tempfile.mkdtemp(prefix="serve_load_")
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as error:
        parser.error(f"--workdir {workdir}: {error.strerror}")
    if args.server_cpus is not None:  # before any thread: they inherit it
        os.sched_setaffinity(0, _cpu_list(args.server_cpus))
    if args.server_nice < 0 and os.getuid() != 0:
        parser.error(f"--server-nice {args.server_nice} raises a priority: it needs root")
    if args.cgroups and os.getuid() != 0:
        parser.error("--cgroups writes the cgroup hierarchy: it needs root")
    groups = _CpuGroups(("server", "flood")) if args.cgroups else None
    try:
        _run(args, workdir, groups)
    finally:
        if groups is not None:
            groups.remove()


def _run(args, workdir, groups):
    server = _Server(args.model_base_path, workdir, args.rest_timeout_ms, args.server_cpus,
                     args.serve_flags, args.server_nice, groups)  # fmt: skip
    server.flood_clients, server.flood_cpus = args.flood_clients, args.flood_cpus
    sentences = [en for en, _ in generate_pairs(500, seed=99)]
    try:
        clean = _phase(server, sentences, args.clients, 0, args.clean_seconds,
                       period=args.good_period)  # fmt: skip
        attack = _phase(server, sentences, args.clients, args.attackers, args.seconds,
                        args.attacks, args.good_period)  # fmt: skip
    finally:
        server.stop()

    print("| phase | good clients | seconds | good requests | good errors | p50 | p95 | p99 "
          "| sentences/s | attack requests |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in (("clean", clean), ("attack", attack)):
        print(
            f"| {name} | {args.clients} | {r.elapsed:.0f} | {len(r.latencies)} | {len(r.errors)} "
            f"| {r.percentile(0.5):.0f} ms | {r.percentile(0.95):.0f} ms "
            f"| {r.percentile(0.99):.0f} ms "
            f"| {r.sentences / r.elapsed:.1f} | {sum(r.attacks.values())} |"
        )
    print("attack requests by class and answer:")
    for (kind, code), n in sorted(attack.attacks.items()):
        print(f"  {kind}: {code} x{n}")
    for q in (0.95, 0.99):
        ratio = attack.percentile(q) / clean.percentile(q)
        print(f"p{q * 100:.0f} attack/clean: {ratio:.2f} (target <= 2)")
    minutes = _per_minute(attack.samples)
    print("| minute | server RSS | server threads |")
    print("| --- | --- | --- |")
    for minute, (rss, threads) in minutes.items():
        print(f"| {minute + 1} | {rss / 2**20:.0f} MiB | {threads:.1f} |")
    if len(minutes) >= 3:
        second, last = minutes[1], minutes[max(minutes)]
        print(f"RSS last/second minute: {last[0] / second[0]:.3f}; "
              f"threads: {last[1] / second[1]:.3f} (target within 10%)")  # fmt: skip
    failed = attack.errors + clean.errors
    if failed:
        print("first failures:", failed[:3])
        sys.exit(1)


if __name__ == "__main__":
    main()
