"""Frames compiled under DistributedDataParallel with Dynamo's DDP optimizer (`torch._dynamo.config.optimize_ddp`, on
by default): every contact with torch/_dynamo/backends/distributed.py is here.

Dynamo then hands the frame's graph to `DDPOptimizer(bucket_bytes_cap, backend).compile_fn`, which splits it at
gradient-bucket boundaries, compiles each piece with the backend (aotcache: one graph entry per piece, the same entry
for every rank) and returns the split GraphModule: placeholders, one `call_module` per compiled piece (a
`WrapperModule` holding the backend's callable and whether to unwrap a 1-tuple), `getitem`s, the output. A frame entry
carries that module as a global of kind "split" (docs/formats/frame-entry-format.md):

    {"kind": "split", "nodes": [node, ...], "pieces": {target: {"key", "single", "index"?, "unwrap"}}}
    node = ["placeholder", name] | ["call_module", name, target, [ref, ...]] | ["getitem", name, ref, int]
         | ["output", tree]       tree = ["ref", name] | ["tuple", [tree, ...]] | ["list", [tree, ...]] | ["none"]

and rebuilds it by running the pieces in that order; a split module of any other shape is not frame-cached. What
decides the split (the bucket caps, the parameters DDP ignores) is in the frame key (`layout`): a process whose DDP
would split otherwise never gets this frame.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch


class Unsupported(Exception):
    """The split module has a shape a frame entry does not carry."""


def optimizer_of(compiler_fn: Any) -> Any | None:
    """The DDPOptimizer whose `compile_fn` `compiler_fn` is, or None."""
    owner = getattr(compiler_fn, "__self__", None)
    if owner is None or getattr(compiler_fn, "__name__", None) != "compile_fn":
        return None
    if type(owner).__name__ != "DDPOptimizer" or not type(owner).__module__.startswith("torch._dynamo.backends"):
        return None
    return owner


def layout(optimizer: Any) -> dict[str, Any]:
    """What decides how the optimizer splits a graph, beside the graph itself: the frame key's "ddp" component."""
    ignored: list[str] = []
    try:
        from torch.nn.parallel import DistributedDataParallel

        module = DistributedDataParallel._get_active_ddp_module()
        ignored = sorted(getattr(module, "parameters_to_ignore", ()) or ())
    except Exception:  # noqa: BLE001 - no active module: the optimizer ignores none
        pass
    return {
        "bucket_bytes_cap": int(optimizer.bucket_bytes_cap),
        "first_bucket_cap": int(optimizer.first_bucket_cap),
        "ignored": ignored,
    }


def split_module(value: Any) -> torch.fx.GraphModule | None:
    """The split module behind a global Dynamo installed (it wraps it in `torch._dynamo.disable`: an
    OptimizedModule around it), or None when the global is not one."""
    gm = getattr(value, "_orig_mod", value)
    if isinstance(gm, torch.fx.GraphModule) and any(
        _is_piece(m) for name, m in gm.named_children() if name.startswith("compiled_")
    ):
        return gm
    return None


def _is_piece(module: Any) -> bool:
    return hasattr(module, "submod") and hasattr(module, "unwrap_singleton_tuple")


def describe(gm: torch.fx.GraphModule, describe_piece: Callable[[Any], dict[str, Any] | None]) -> dict[str, Any]:
    """The "split" global of `gm`; raises Unsupported for another shape, or when a piece has no entry
    (`describe_piece` returns None)."""
    nodes: list[list[Any]] = []
    pieces: dict[str, dict[str, Any]] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            nodes.append(["placeholder", n.name])
        elif n.op == "call_module":
            module = gm.get_submodule(str(n.target))
            if not _is_piece(module) or n.kwargs:
                raise Unsupported(f"{n.target} is not a compiled piece")
            described = describe_piece(module.submod)
            if described is None:
                raise Unsupported(f"piece {n.target} has no cache entry")
            pieces[str(n.target)] = {**described, "unwrap": bool(module.unwrap_singleton_tuple)}
            nodes.append(["call_module", n.name, str(n.target), [_ref(a) for a in n.args]])
        elif n.op == "call_function" and n.target is operator.getitem and not n.kwargs:
            source, index = n.args
            if not isinstance(index, int):
                raise Unsupported(f"getitem {n.name} with a {type(index).__name__} index")
            nodes.append(["getitem", n.name, _ref(source), index])
        elif n.op == "output":
            nodes.append(["output", _tree(n.args[0])])
        else:
            raise Unsupported(f"node {n.name} ({n.op} {n.target})")
    return {"nodes": nodes, "pieces": pieces}


def _ref(arg: Any) -> list[str]:
    if not isinstance(arg, torch.fx.Node):
        raise Unsupported(f"a constant argument {type(arg).__name__}")
    return ["ref", arg.name]


def _tree(value: Any) -> list[Any]:
    if value is None:
        return ["none"]
    if isinstance(value, torch.fx.Node):
        return _ref(value)
    if isinstance(value, (tuple, list)):
        return ["tuple" if isinstance(value, tuple) else "list", [_tree(v) for v in value]]
    raise Unsupported(f"an output of type {type(value).__name__}")


def build(spec: dict[str, Any], pieces: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """The callable the split module was, from its description and each piece's loaded callable (which returns a
    sequence, as the backend's artifacts do)."""
    nodes = spec["nodes"]
    unwrap = {target: bool(p["unwrap"]) for target, p in spec["pieces"].items()}
    names = [n[1] for n in nodes if n[0] == "placeholder"]

    def run(*args: Any) -> Any:
        env = dict(zip(names, args))
        for node in nodes:
            op = node[0]
            if op == "call_module":
                out = pieces[node[2]](*[env[r[1]] for r in node[3]])
                if unwrap[node[2]] and isinstance(out, (tuple, list)):
                    out = out[0]
                env[node[1]] = out
            elif op == "getitem":
                env[node[1]] = env[node[2][1]][node[3]]
            elif op == "output":
                return _value(node[1], env)
        return None

    return run


def _value(tree: list[Any], env: dict[str, Any]) -> Any:
    kind = tree[0]
    if kind == "ref":
        return env[tree[1]]
    if kind == "none":
        return None
    items = [_value(t, env) for t in tree[1]]
    return tuple(items) if kind == "tuple" else items
