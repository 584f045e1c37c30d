"""The package's folders are its architecture: data flows one way, from the
layers to the server, no module imports from a part to its right, and no
modules import each other in a loop (within a part, or between parts that
share a place). The layers and the model stay backend-neutral Keras: no
TensorFlow, no private Keras API."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "keras_transformer"

# Every part of the package and its place, left to right. A part may import
# from its own place and from those to its left. A new module or folder
# needs a place here before its first test runs.
PLACES = {
    # Helpers any part may use; they import no other part.
    "_validation": 0,
    "_extras": 0,
    "_lazy": 0,
    "_version_folders": 0,
    "_native_logs": 0,
    "_config_docs": 0,
    "buckets": 0,
    "special_ids": 0,
    "layers": 1,
    "models": 2,
    # What training uses and any Keras user may: on every backend.
    "losses": 3,
    "metrics": 3,
    "schedules": 3,
    "optimizers": 3,
    "data": 3,
    "training": 4,
    "decoding": 5,
    "interop": 6,  # checkpoints of other toolkits read into runs, and their weight tables
    "tuning": 6,  # wraps models and training for keras-tuner, scores with decoding
    "runtime": 6,  # loads and runs an export: for the server, the corpus jobs, the CLI
    "export": 7,  # the writers of every format, one registry of them
    "serving": 7,
    "corpus": 7,  # offline batch jobs over an export, beside the server
    "cli": 8,  # a thin shell over all of them
}
# Parts that run on every Keras backend.
NEUTRAL = ("layers", "models")


def _module_name(path, root):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node, module, is_package):
    """The dotted names an import statement of `module` (a list of its
    parts) reads, relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module if is_package else module[:-1]
        base = base[: len(base) - node.level + 1]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # `from package import part` reads the part, not the package.
    return [f"{prefix}.{alias.name}" for alias in node.names]


def imports(root):
    """`(file, line, importing part, imported name)` for every import of
    every module under the package folder `root`, nested ones included."""
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        part = module[1] if len(module) > 1 else None
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _imported(node, module, path.name == "__init__.py"):
                    yield path.relative_to(root.parent), node.lineno, part, name


def backward_imports(root, places):
    """Each import by which a part reads a part to its right."""
    found = []
    for where, line, part, name in imports(root):
        dotted = name.split(".")
        if part is None or dotted[0] != root.name or len(dotted) < 2:
            continue
        target = dotted[1]
        if target in places and places[target] > places[part]:
            found.append(f"{where}:{line}: {part} imports {name}")
    return found


def _modules(root):
    """The dotted names of the modules under the package folder `root`."""
    return {".".join(_module_name(path, root)) for path in root.rglob("*.py")}


def import_loops(root):
    """Each loop of imports among the modules under `root`, nested imports
    included, as `a -> b -> a` (one line a loop, from its first module in
    sorted order)."""
    modules = _modules(root)
    graph = {}
    for where, _, _, name in imports(root):
        source = ".".join(_module_name(root.parent / where, root))
        dotted = name.split(".")
        # `from package.module import name` reads the module.
        while dotted and ".".join(dotted) not in modules:
            dotted.pop()
        target = ".".join(dotted)
        if target and target != source and dotted[0] == root.name:
            graph.setdefault(source, set()).add(target)
    loops, done = set(), set()

    def visit(node, path):
        if node in path:
            loop = path[path.index(node) :]
            first = loop.index(min(loop))
            loop = loop[first:] + loop[:first]
            loops.add(" -> ".join(loop + [loop[0]]))
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return sorted(loops)


def test_every_part_has_a_place():
    parts = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    parts |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert parts == set(PLACES), "place new parts in PLACES; drop removed ones"


def test_no_part_imports_from_its_right():
    assert backward_imports(PACKAGE, PLACES) == []


def test_no_modules_import_each_other_in_a_loop():
    assert import_loops(PACKAGE) == []


def test_the_layers_and_model_are_backend_neutral_keras():
    found = []
    for where, line, part, name in imports(PACKAGE):
        top = name.split(".")
        private_keras = top[0] == "keras" and any(p == "src" or p.startswith("_") for p in top)
        if part in NEUTRAL and (top[0] in ("tensorflow", "jax", "torch") or private_keras):
            found.append(f"{where}:{line}: {name}")
    assert found == []


def _write(root, relative, text=""):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "statement",
    [
        "from keras_transformer.training import fit",
        "import keras_transformer.serving.server",
        "from keras_transformer import training",
        "from ..training import fit",
        "def f():\n    from ..serving import server\n",
    ],
)
def test_a_backward_import_is_found(tmp_path, statement):
    root = tmp_path / "keras_transformer"
    for part in ("layers", "training", "serving"):
        _write(root, f"{part}/__init__.py")
    _write(root, "__init__.py")
    _write(root, "layers/attention.py", statement)
    # Imports to the left, and within a part, are allowed.
    _write(root, "training/fit.py", "from ..layers import attention\nfrom . import loop\n")
    found = backward_imports(root, PLACES)
    assert len(found) == 1 and found[0].startswith("keras_transformer/layers/attention.py:")


@pytest.mark.parametrize(
    "files, loop",
    [
        # Within a part: an options module that also dispatches to a writer.
        ({"export/options.py": "def export():\n    from . import servable\n",
          "export/servable.py": "from .options import check\n"},
         "keras_transformer.export.options -> keras_transformer.export.servable"),
        # Between two parts of one place, the import deferred into a function.
        ({"export/options.py": "def f():\n    from ..interop import marian_export\n",
          "interop/marian_export.py": "from keras_transformer.export.servable import write\n",
          "export/servable.py": "from keras_transformer.export import options\n"},
         "keras_transformer.export.options -> keras_transformer.interop.marian_export"
         " -> keras_transformer.export.servable"),
        # No loop: a chain.
        ({"export/options.py": "", "export/servable.py": "from . import options\n",
          "interop/marian_export.py": "from ..export import servable\n"}, None),
    ],
)  # fmt: skip
def test_an_import_loop_is_found(tmp_path, files, loop):
    root = tmp_path / "keras_transformer"
    _write(root, "__init__.py")
    for part in ("export", "interop"):
        _write(root, f"{part}/__init__.py")
    for relative, text in files.items():
        _write(root, relative, text)
    found = import_loops(root)
    assert found == ([] if loop is None else [f"{loop} -> keras_transformer.export.options"])
