"""Pins for custom ops: what makes a graph that calls a `torch.library` op cacheable.

A custom op's kernel is code outside the graph: changing it changes the compiled result while the graph stays the
same. An op is pinned either by a version the user registers (`aotcache.register_op_version("ns::op", "2")`, bumped
whenever the implementation changes) or, for ops defined with `torch.library.custom_op`, by a digest of the source of
every function registered for it (implementations per device, fake/abstract, autograd, vmap, dispatch rules).
An op with neither bypasses the cache with a reason that says how to pin it.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from aotcache.capture.code_digest import Unhashable, function_digest
from aotcache.torch_glue import dispatch

# Namespaces whose kernels ship inside libtorch: pinned by the torch version like aten.
TORCH_OP_NAMESPACES = frozenset(
    {"aten", "prims", "rngprims", "_c10d_functional", "_c10d_functional_autograd", "c10d", "quantized", "_quantized"}
)

_lock = threading.Lock()
_registered: dict[str, str] = {}


def register_op_version(qualname: str, version: str) -> None:
    """Pins custom op `qualname` ("ns::op", every overload) at `version` in the key of every graph that calls it.

    Bump the version whenever the op's implementation changes: entries compiled with another version then miss.
    A registered version takes precedence over the source digest aotcache would otherwise compute.
    """
    if not isinstance(qualname, str) or "::" not in qualname or "." in qualname.split("::", 1)[1]:
        raise ValueError(f'expected an op name like "mylib::my_op", got {qualname!r}')
    if not isinstance(version, str) or not version:
        raise ValueError(f"expected a non-empty version string, got {version!r}")
    with _lock:
        _registered[qualname] = version


def unregister_op_version(qualname: str) -> None:
    with _lock:
        _registered.pop(qualname, None)


_digests: dict[Any, str] = {}


def op_pin(op: dispatch.OpOverload) -> str | None:
    """'registered:V' or 'source:HEX' for a custom op; None when it cannot be pinned (the rules then bypass).

    Source digests are computed once per op and process: a re-registered implementation takes a new process."""
    qualname = f"{op.namespace}::{op._opname}"
    with _lock:
        version = _registered.get(qualname)
    if version is not None:
        return f"registered:{version}"
    cached = _digests.get(op)
    if cached is not None:
        return cached
    pin = _source_pin(qualname)
    if pin is not None:
        _digests[op] = pin
    return pin


def _source_pin(qualname: str) -> str | None:
    opdef = dispatch.maybe_get_opdef(qualname)
    if opdef is None:  # defined through torch.library.Library / C++: its kernels are not reachable as Python source
        return None
    parts: list[tuple[str, Any]] = [("schema", str(opdef._schema))]
    fns: list[tuple[str, Any]] = [("init", opdef._init_fn)]
    fns += [(f"backend.{k}", fn) for k, fn in sorted(opdef._backend_fns.items(), key=lambda kv: str(kv[0]))]
    fns += [("fake", opdef._abstract_fn), ("setup_context", opdef._setup_context_fn)]
    fns += [("backward", opdef._backward_fn), ("vmap", opdef._vmap_fn)]
    fns += sorted(
        ((f"dispatch.{t.__module__}.{t.__qualname__}", fn) for t, fn in opdef._torch_dispatch_fns.items()),
        key=lambda kv: kv[0],
    )
    try:
        for name, fn in fns:
            if fn is not None:
                parts.append((name, function_digest(fn)))
    except Unhashable:
        return None
    parts.append(("autocast", repr(sorted((k, str(v)) for k, v in opdef._autocast_dtype.items()))))
    h = hashlib.sha256()
    for name, value in sorted(parts):
        h.update(f"{name}={value};".encode())
    return f"source:{h.hexdigest()}"
