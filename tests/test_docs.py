"""The README and the guides under docs/ show commands that the command line
accepts and Python that compiles: the documentation cannot drift from the
flags."""

import glob
import os
import re
import shlex

import pytest

from keras_transformer import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(language):
    for page in PAGES:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for kind, body in _BLOCK.findall(text):
            if kind == language:
                yield os.path.relpath(page, REPO), body


def _commands():
    for page, body in _blocks("bash"):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("keras-transformer "):
                yield page, shlex.split(line)[1:]


COMMANDS = list(_commands())
SNIPPETS = list(_blocks("python"))


def test_the_pages_have_commands_and_code():
    assert len(COMMANDS) >= 15 and len(SNIPPETS) >= 4
    assert {page for page, _ in COMMANDS} >= {"README.md", "docs/serving.md", "docs/training.md"}


@pytest.mark.parametrize("page,argv", COMMANDS, ids=[" ".join(a[:2]) for _, a in COMMANDS])
def test_every_documented_command_parses(page, argv):
    cli.build_parser().parse_args(argv)  # exits 2, naming the flag, if it drifted


@pytest.mark.parametrize("page,code", SNIPPETS, ids=[p for p, _ in SNIPPETS])
def test_every_python_snippet_compiles(page, code):
    compile(code, page, "exec")
