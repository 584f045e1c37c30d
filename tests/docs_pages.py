"""The guides as a newcomer follows them: their code blocks, read in order,
and the small settings that make each documented command run in seconds.

A page's ```bash lines are steps: `keras-transformer ...` commands (run
with tiny settings put in place of the documented ones), `python -m
keras_transformer...` lines, `python - <<'PY'` scripts and `curl` calls.
Every other line is a known skip, with its reason (`SKIPPED`): a line
that is neither fails the suite, so a new line in a guide is either run or
said to be skipped. The ```python blocks of a page run after its commands,
in one fresh process, in order, as a reader pastes them.
"""

import json
import re
import shlex

_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)

# Lines of the guides that the suite does not run, by how they start.
SKIPPED = {
    "make demo": "the demo is `make demo` itself (and tests/test_examples.py)",
    "make test": "the suite itself",
    "pip install": "installs packages",
    "DATA=": "Multi30k's hour-long recipe (benchmarks, by hand)",
    ".venv/bin/python benchmarks/": "benchmarks run by hand",
    "docker compose": "no Docker engine in the suite",
    "ray start": "needs a Ray cluster of several machines",
    "keras-transformer corpus --engine ray": (
        "needs a Ray cluster (tests/corpus/test_ray.py runs one on loopback)"
    ),
    "keras-transformer train --dataset tfds:": "downloads a TFDS corpus",
}
# The guides whose ```bash commands the suite runs.
COMMAND_PAGES = (
    "README.md",
    "docs/training.md",
    "docs/serving.md",
    "docs/pretrained.md",
    "docs/corpus.md",
)
TINY_MODEL = '{"num_layers": 1, "d_model": 32, "num_heads": 2, "dff": 64}'
TINY_SPACE = '{"d_model": [16], "num_layers": [1], "dff": [32], "batch_tokens": [512]}'


def blocks(text, language):
    """The bodies of a page's ```language blocks, in order."""
    return [body for kind, body in _BLOCK.findall(text) if kind == language]


def _skip_reason(line):
    for start, reason in SKIPPED.items():
        if line.startswith(start):
            return reason
    return None


def steps(text):
    """A page's ```bash steps, in order: `(kind, payload)` with kind
    `"cli"` (argv after `keras-transformer`), `"python-m"` (argv after
    `python`), `"script"` (a heredoc's Python), `"curl"` (argv after
    `curl`) or `"skip"` (`(line, reason)`).

    Raises:
        ValueError: a line the suite neither runs nor knows to skip.
    """
    found = []
    for body in blocks(text, "bash"):
        lines = body.replace("\\\n", " ").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].split("  #")[0].strip()
            i += 1
            if not line or line.startswith("#"):
                continue
            heredoc = re.fullmatch(r"python - <<'(\w+)'", line)
            if heredoc:
                end = lines.index(heredoc.group(1), i)
                found.append(("script", "\n".join(lines[i:end])))
                i = end + 1
                continue
            reason = _skip_reason(line)
            if reason:
                found.append(("skip", (line, reason)))
            elif line.startswith("keras-transformer "):
                found.append(("cli", shlex.split(line)[1:]))
            elif line.startswith("python -m keras_transformer"):
                found.append(("python-m", shlex.split(line)[1:]))
            elif line.startswith("curl "):
                found.append(("curl", shlex.split(line)[1:]))
            else:
                raise ValueError(f"a guide's line the suite neither runs nor skips: {line!r}")
    return found


def _setting(argv, flag, value):
    """`argv` with `flag`'s value replaced, or the flag added."""
    argv = list(argv)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


def tiny(argv, data_dir):
    """A documented command with settings that run in seconds: the
    documented flags stay, their sizes shrink."""
    command = argv[0]
    settings = {}
    if command == "train" and "--init-from" in argv:
        # The tiny checkpoint's position table is 64 long (OPUS-MT's, 512).
        settings = {"--epochs": "1", "--steps-per-epoch": "2", "--batch-tokens": "512"}
        settings.update({"--warmup-steps": "2", "--max-length": "32"})
    elif command == "train":
        settings = {
            "--preset": "tiny",
            "--model-overrides": TINY_MODEL,
            "--epochs": "1",
            "--steps-per-epoch": "2",
            "--vocab-size": "200",
            "--tokenizer-sample": "2000",
            "--batch-tokens": "512",
            "--max-length": "32",
            "--warmup-steps": "2",
            "--data-dir": data_dir,
        }
    elif command == "tune":
        settings = {
            "--max-trials": "1",
            "--epochs": "1",
            "--steps-per-epoch": "2",
            "--vocab-size": "200",
            "--tokenizer-sample": "2000",
            "--max-length": "32",
            "--space": TINY_SPACE,
            "--data-dir": data_dir,
            "--bleu-sentences": "4",
        }
    elif command == "evaluate":
        settings = {"--max-output-length": "16"}
    elif command == "export" and "ctranslate2" not in argv:
        settings = {"--max-output-length": "16"}
        if "--jit-compile" in argv:
            settings.update({"--batch-sizes": "1", "--lengths": "16"})
    for flag, value in settings.items():
        argv = _setting(argv, flag, value)
    return argv


def with_ports(value, grpc_port, rest_port):
    """A step or snippet with the documented ports 8500 and 8501 replaced
    by free ones (a string, or every string of a list)."""
    if isinstance(value, list):
        return [with_ports(v, grpc_port, rest_port) for v in value]
    return re.sub(r"\b8500\b", str(grpc_port), re.sub(r"\b8501\b", str(rest_port), value))


def encode(items):
    return json.dumps(items)
