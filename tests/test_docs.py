"""The README and the guides under docs/ run as written: every page's
Python blocks run in a fresh process, the commands of the guides a
newcomer follows run in order in one folder (tiny settings in place of the
documented sizes), every documented command parses, and every link leads
somewhere: the documentation cannot drift from the code, the flags or the
files."""

import glob
import gzip
import json
import os
import re
import shlex
import shutil

import pytest

from keras_transformer import cli
from tests import docs_pages
from tests.processes import free_port, run_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]


def _blocks(language):
    for page in PAGES:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for body in docs_pages.blocks(text, language):
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


def _read(page):
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        return f.read()


def _write_lines(path, lines):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _pairs(count, seed):
    from keras_transformer.data.synthetic import generate_pairs

    return generate_pairs(count, seed=seed, max_words=12)


def _parallel(workdir, prefix, count, seed, suffix=""):
    pairs = _pairs(count, seed)
    _write_lines(os.path.join(workdir, f"{prefix}.en{suffix}"), [en for en, _ in pairs])
    _write_lines(os.path.join(workdir, f"{prefix}.de{suffix}"), [de for _, de in pairs])


def _marian(workdir, request):
    pytest.importorskip("transformers")
    from tests.interop.marian_checkpoints import build_checkpoint

    build_checkpoint(os.path.join(workdir, "opus-mt-en-de"))


def _copy_run(request, workdir, name):
    shutil.copytree(request.getfixturevalue("trained_run")["run"], os.path.join(workdir, name))


# What each page assumes its reader has: their own files, a run of an
# earlier step of the guides, a checkpoint from the hub (built here).
def _given_readme(workdir, request):
    _write_lines(os.path.join(workdir, "mono", "part-1.en"), [en for en, _ in _pairs(6, 5)])
    _marian(workdir, request)


def _given_training(workdir, request):
    for split, count, seed in (("train", 400, 1), ("val", 40, 2), ("test", 20, 3)):
        _parallel(workdir, split, count, seed, ".gz")
    (yaml_block,) = docs_pages.blocks(_read("docs/training.md"), "yaml")
    with open(os.path.join(workdir, "train.yaml"), "w", encoding="utf-8") as f:
        f.write(yaml_block)


def _given_serving(workdir, request):
    _copy_run(request, workdir, os.path.join("runs", "demo"))


def _given_pretrained(workdir, request):
    _marian(workdir, request)
    _parallel(workdir, "in-domain", 200, 4)


def _given_corpus(workdir, request):
    _copy_run(request, workdir, os.path.join("runs", "de-en"))
    exports = os.path.join(workdir, "exports", "en-de")
    shutil.copytree(request.getfixturevalue("export_base"), exports)
    for i in (1, 2):
        pairs = _pairs(5, 10 + i)
        _write_lines(os.path.join(workdir, "mono", f"part-{i}.de.gz"), [de for _, de in pairs])
        _write_lines(os.path.join(workdir, "mono", f"part-{i}.en"), [en for en, _ in pairs])
        _write_lines(os.path.join(workdir, "crawl", f"part-{i}.en"), [en for en, _ in pairs])
        _write_lines(os.path.join(workdir, "crawl", f"part-{i}.de"), [de for _, de in pairs])


GIVEN = {
    "README.md": _given_readme,
    "docs/training.md": _given_training,
    "docs/serving.md": _given_serving,
    "docs/pretrained.md": _given_pretrained,
    "docs/corpus.md": _given_corpus,
}
RUN_PAGES = sorted({*docs_pages.COMMAND_PAGES, *(page for page, _ in SNIPPETS)})


def test_every_guide_line_is_run_or_skipped_with_its_reason():
    for page in docs_pages.COMMAND_PAGES:
        kinds = [kind for kind, _ in docs_pages.steps(_read(page))]
        assert "cli" in kinds, page
    with pytest.raises(ValueError, match="neither runs nor skips: 'rm -rf runs'"):
        docs_pages.steps("```bash\nrm -rf runs\n```\n")


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_guide_runs_as_written(page, tmp_path, request):
    """The page's commands in order (its ```bash blocks, for the guides a
    newcomer follows), then its ```python blocks in one fresh process, in
    a folder holding what the page assumes its reader has."""
    data_dir = request.getfixturevalue("synthetic_tfds")
    workdir = str(tmp_path / "work")
    os.makedirs(workdir)
    if page in GIVEN:
        GIVEN[page](workdir, request)
    grpc_port, rest_port = free_port(), free_port()
    steps = []
    if page in docs_pages.COMMAND_PAGES:
        for kind, payload in docs_pages.steps(_read(page)):
            if kind == "cli":
                payload = docs_pages.tiny(payload, data_dir)
                if payload[0] == "serve" and "--rest-api-port" not in payload:
                    payload = [*payload, "--rest-api-port", "8501"]
                if payload[0] == "serve" and "--model-name" not in payload:
                    payload = [*payload, "--model-name", "default"]
            if kind != "skip":
                payload = docs_pages.with_ports(payload, grpc_port, rest_port)
            steps.append((kind, payload))
    snippets = [
        docs_pages.with_ports(code, grpc_port, rest_port) for p, code in SNIPPETS if p == page
    ]
    plan = {
        "workdir": workdir,
        "steps": steps,
        "snippets": snippets,
        # The reader's default TFDS folder: the synthetic corpus, built once.
        "env": {"TFDS_DATA_DIR": data_dir, "KT_OFFLINE": "1"},
    }
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    result = run_python(os.path.join(REPO, "tests", "docs_driver.py"), str(plan_path), timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


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
