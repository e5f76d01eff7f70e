"""The boundary with torch's private modules: outside python/aotcache/torch_glue/, nothing imports a private torch
module (`import torch._x`, `from torch._x import`, `from torch import _x`, `from torch.utils._x import`) or reads a
private torch name (`torch._x`, `torch.utils._x`); torch_glue lends those names (each module's `_LENT` table) and
holds the probes of the features that rest on them. A new contact fails here: add the name to the torch_glue module
of its subsystem."""

from __future__ import annotations

import ast

from conftest import REPO

PACKAGE = REPO / "python" / "aotcache"
GLUE = "torch_glue/"


def _private(dotted: str) -> bool:
    """A torch module path with a private segment: torch._dynamo, torch.utils._pytree (dunders are public)."""
    parts = dotted.split(".")
    return parts[0] == "torch" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _dotted(node: ast.AST) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(names)]) if isinstance(node, ast.Name) else None


def private_torch_contacts(source: str) -> list[tuple[int, str]]:
    """(line, what) of every import of a private torch module and every read of a private torch name (`torch._x`,
    `torch.utils._x`) in `source`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f"import {a.name}") for a in node.names if _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _private(node.module):
                out.append((node.lineno, f"from {node.module} import"))
            elif node.module.split(".")[0] == "torch":
                private = [a.name for a in node.names if _private(f"{node.module}.{a.name}")]
                out += [(node.lineno, f"from {node.module} import {name}") for name in private]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted and _private(dotted) and not _private(dotted.rpartition(".")[0]):
                out.append((node.lineno, dotted))  # the shortest private prefix, once per chain
    return out


def test_only_torch_glue_touches_torch_internals():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(GLUE):
            contacts = private_torch_contacts(path.read_text())
            if contacts:
                found[rel] = contacts
    assert not found, f"contacts with torch's private modules outside torch_glue/ (file: [(line, what)]): {found}"


def test_torch_glue_is_where_they_are():
    """The package the test exempts is the one that lends them (a renamed folder must not empty the first test), and
    every name it lends resolves on this torch."""
    import importlib

    lent = {}
    for path in sorted((PACKAGE / GLUE).glob("*.py")):
        module = importlib.import_module(f"aotcache.torch_glue.{path.stem}")
        for name, where in getattr(module, "_LENT", {}).items():
            lent[f"{path.stem}.{name}"] = where
            assert getattr(module, name) is not None, (path.stem, name, where)
    assert len(lent) >= 50 and all(w.startswith("torch") for w in lent.values()), lent


def test_the_counter_sees_every_form():
    src = "import torch._dynamo\nfrom torch._inductor import config\nfrom torch import _C\nx = torch._ops.OpOverload\n"
    src += "from torch.utils._pytree import tree_map\ny = torch.utils._sympy.symbol\n"
    src += "import torch\nfrom torch import nn\nz = torch.__version__\nw = torch.nn.functional.relu\n"
    assert sorted(what for _, what in private_torch_contacts(src)) == sorted(
        [
            "import torch._dynamo",
            "from torch._inductor import",
            "from torch import _C",
            "torch._ops",
            "from torch.utils._pytree import",
            "torch.utils._sympy",
        ]
    )
