"""The boundary with torch's private modules: every `import torch._...` / `from torch._... import` in python/aotcache,
counted per file. Today's contacts are the ceiling (issue 42 moves them into one package, one module per torch
subsystem); a new file that imports torch's internals, or a file that imports more of them, fails here and must go
through the existing contact points instead (or lower a count here when it moves one out)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "aotcache"

# file -> the most imports of torch's private modules it may have (the count on 2026-12-07)
CEILING = {
    "compiler.py": 5,
    "decomposition_lazily.py": 1,
    "frames/dynamic_state.py": 5,
    "frames/guards.py": 10,
    "frames/hooks.py": 13,
    "frames/process_state.py": 1,
    "frames/read_set.py": 1,
    "frames/verify.py": 2,
    "global_state.py": 5,
    "isa_probe.py": 3,
    "kernels.py": 1,
    "machine.py": 1,
    "tensorify.py": 2,
    "torch_internals.py": 16,
    "wrapper_loading.py": 9,
}


def private_torch_imports(source: str) -> int:
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            count += sum(alias.name.startswith("torch._") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("torch._"):
                count += 1
            elif node.module == "torch":
                count += sum(alias.name.startswith("_") for alias in node.names)
    return count


def test_no_new_contact_with_torch_internals():
    found = collections.Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        n = private_torch_imports(path.read_text())
        if n:
            found[path.relative_to(PACKAGE).as_posix()] = n
    over = {f: (n, CEILING.get(f, 0)) for f, n in found.items() if n > CEILING.get(f, 0)}
    assert not over, f"imports of torch's private modules beyond the ceiling (file: (found, allowed)): {over}"


def test_the_counter_sees_every_form():
    src = "import torch._dynamo\nfrom torch._inductor import config\nfrom torch import _C\n"
    src += "import torch\nfrom torch import nn\n"
    assert private_torch_imports(src) == 3
