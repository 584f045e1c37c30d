"""The README and the guides under docs/ show commands that the command line
accepts and Python that compiles, and every page's links lead somewhere:
the documentation cannot drift from the flags or the files."""

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
    args = cli.parse_command_line(argv)  # exits 2, naming the flag, if it drifted
    if getattr(args, "beam_args", None):  # flags of Beam's own, for --engine beam only
        assert argv[argv.index("--engine") + 1] == "beam", argv


@pytest.mark.parametrize("page,code", SNIPPETS, ids=[p for p, _ in SNIPPETS])
def test_every_python_snippet_compiles(page, code):
    compile(code, page, "exec")


# Pages a reader follows links through: the guides, their notes, the
# deployment README and the benchmark results.
LINKED_PAGES = [
    *PAGES,
    *sorted(glob.glob(os.path.join(REPO, "docs", "notes", "*.md"))),
    os.path.join(REPO, "serving", "README.md"),
    os.path.join(REPO, "benchmarks", "RESULTS.md"),
]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#+ (.*)$", re.M)


def _anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _links():
    for page in LINKED_PAGES:
        with open(page, encoding="utf-8") as f:
            for target in _LINK.findall(f.read()):
                if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                    yield os.path.relpath(page, REPO), target


LINKS = list(_links())


def test_the_pages_link_to_each_other():
    assert len(LINKS) >= 20
    assert "docs/notes/2026-11-24-xla-export.md" in {
        os.path.normpath(os.path.join(os.path.dirname(p), t)) for p, t in LINKS
    }


@pytest.mark.parametrize("page,target", LINKS, ids=[f"{p}->{t}" for p, t in LINKS])
def test_every_relative_link_resolves(page, target):
    path, _, anchor = target.partition("#")
    path = os.path.join(REPO, os.path.dirname(page), path) if path else os.path.join(REPO, page)
    assert os.path.exists(path), f"{page} links to {target}, which does not exist"
    if anchor:
        with open(path, encoding="utf-8") as f:
            anchors = {_anchor(h) for h in _HEADING.findall(f.read())}
        assert anchor in anchors, f"{page} links to {target}: no such heading"
