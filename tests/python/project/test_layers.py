"""The layout tells the architecture: python/aotcache's modules import downward only, with no cycle, counting the
imports inside functions too (issue 42: a cycle of 19 modules ran settings -> frames -> hooks -> default_backend ->
backend -> pipeline -> settings); and importing aotcache changes nothing in torch (the one activation is at the first
compile: aotcache/activation.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "python" / "aotcache"

# Lowest first. A module may import modules of its own layer or a lower one. Within a layer the graph must still be
# acyclic. (A prefix names a package and its modules; "aotcache" alone is the facade, __init__.py.)
LAYERS = [
    ("base", ["aotcache._core", "aotcache.errors", "aotcache.counters", "aotcache.settings", "aotcache.thread_state",
              "aotcache.wrapper_code", "aotcache.demo_model"]),
    ("torch glue", ["aotcache.torch_glue"]),
    ("storage", ["aotcache.storage"]),
    ("capture and key inputs", ["aotcache.capture", "aotcache.global_state", "aotcache.machine", "aotcache.guarded",
                                "aotcache.tensorify", "aotcache.decomposition_lazily"]),
    ("compile and load", ["aotcache.compiler", "aotcache.wrapper_loading", "aotcache.kernels", "aotcache.isa_probe",
                          "aotcache.default_routing"]),
    ("pipeline", ["aotcache.pipeline"]),
    ("backend", ["aotcache.backend"]),
    ("frames", ["aotcache.frames"]),
    ("entry", ["aotcache.activation", "aotcache.default_backend", "aotcache.startup", "aotcache.demo", "aotcache"]),
]  # fmt: skip


def modules() -> dict[str, Path | None]:
    out: dict[str, Path | None] = {"aotcache._core": None}  # the C++ extension
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The aotcache modules `name` imports anywhere in its file (a package's own attribute resolves to the package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("aotcache") and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: (imports(name, path, known) if path else set()) for name, path in known.items()}


def layer_of(name: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or (prefix != "aotcache" and name.startswith(prefix + "."))) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{name} is in no layer of LAYERS: add it where it belongs"
    return rank


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, f"import cycles (imports inside functions counted): {found}"


def test_layers_import_downward_only():
    edges = graph()
    upward = sorted(
        f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
        for a, targets in edges.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    )
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_the_checks_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("aotcache.frames.hooks") > layer_of("aotcache.pipeline.lookup") > layer_of("aotcache.settings")
    assert layer_of("aotcache") == len(LAYERS) - 1


IMPORT_ALL = """
import importlib, json, pkgutil
import torch
from torch._dynamo import convert_frame, guards
from torch._inductor import codecache, output_code
from torch._inductor.cpu_vec_isa import VecISA

wrapper = torch._TorchCompileInductorWrapper


def torch_now():
    return {
        "compile": convert_frame._compile,
        "cfm": convert_frame.CheckFunctionManager,
        "serialize": guards.CheckFunctionManager.serialize_guards,
        "load_async": codecache.CppCodeCache.__dict__["load_async"],
        "reload": codecache._reload_python_module,
        "call": output_code.CompiledFxGraph.__call__,
        "check_build": VecISA.__dict__["check_build"],
        "wrapper_init": wrapper.__init__,
        "wrapper_call": wrapper.__call__,
    }


before = torch_now()
import aotcache
names = []
for info in pkgutil.walk_packages(aotcache.__path__, "aotcache."):
    if info.name not in ("aotcache.demo", "aotcache.startup"):
        importlib.import_module(info.name)
        names.append(info.name)
changed = sorted(k for k, v in torch_now().items() if v is not before[k])
fn = aotcache.aotcache_backend  # the entry point: activates
activated = convert_frame._compile is not before["compile"]
print("RESULT " + json.dumps({"imported": len(names), "changed": changed, "activated": activated}))
"""


def test_importing_aotcache_changes_nothing_in_torch_until_the_backend_is_looked_up():
    """Every module imported (demo and startup aside: programs): torch's functions are its own; looking the backend
    up (the entry point) then installs the frame cache's hooks."""
    proc = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    assert result["imported"] >= 40 and result["changed"] == [], result
    assert result["activated"], result
