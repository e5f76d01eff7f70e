"""Process-wide state a trace folds into constants, carried by a frame entry and checked when it loads.

Dynamo evaluates some queries once while tracing and bakes their answers into the bytecode and graphs it makes, with
no guard: inside one process they cannot change (torch.distributed.is_initialized, get_world_size, get_rank, the
autocast dtype...). Across processes they do: a cache filled by a single-process run, served under torchrun, would
run the single-process branch. Three kinds of such state, each recorded with the frame (in its "facts") and compared
in the loading process before the frame is served:

- `queries`: the folded calls the trace made. The table is torch's own (`torch._dynamo.variables.torch`:
  `constant_fold_functions`), read at run time so a torch that adds a query is covered: every folded function is
  a query of process state unless it is pure (`PURE`: its answer depends on its arguments alone) or Dynamo guards
  its answer itself (`constant_fold_functions_need_guards`: an EQUALS_MATCH the read set checks by content). Each
  call is recorded by name and constant arguments and answered again on load; a call with an argument that is not
  a constant (a process group object) makes the frame bypass (`process_query_argument`).
- `global_state`: the state Dynamo's GLOBAL_STATE guard checks per call (grad mode, autocast enabled and dtypes per
  device, default dtype, deterministic algorithms, TF32 and reduced-precision flags, thread count, torch function
  mode). Dynamo rebuilds that guard from the loading process's own state, so it always holds for the first call:
  the recorded snapshot is compared instead.
- `compile_state`: what compiling the frame's graphs read from the process besides their keys' own inputs
  (`global_state.autograd_state`, the scaled-dot-product-attention backend switches included): a served frame loads
  its graphs by the keys they were stored under, without computing a key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import types
from typing import Any

import torch

from aotcache.torch_glue import dynamo as dynamo_glue

# Folded functions whose answer depends only on their arguments (checked against torch's table by
# tests/python/frames/test_process_state.py, so a torch that adds a function is classified there).
PURE = frozenset(
    {
        "torch._assert",
        "torch.is_complex",
        "torch.is_floating_point",
        "torch.promote_types",
        "torch.nn._reduction.get_enum",
    }
)


def query_name(fn: Any) -> str:
    """`module.name` as the user calls it (a C function of torch's table by its own name: torch.is_floating_point,
    not torch._VariableFunctionsClass.is_floating_point)."""
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "__self__", None), "__name__", "?")
    if isinstance(fn, types.BuiltinFunctionType):
        return f"{module}.{fn.__name__}"
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"


@functools.cache
def folded_tables() -> tuple[dict[Any, None], dict[Any, None]]:
    """(every function Dynamo constant-folds, those of them it guards), as torch lists them."""
    from aotcache.torch_glue.dynamo import torch_variables as dynamo_torch

    return dict(dynamo_torch.constant_fold_functions), dict(dynamo_torch.constant_fold_functions_need_guards)


@functools.cache
def stateful_queries() -> dict[Any, str]:
    """{function: name} of the folded functions whose answer is process state (not pure, not guarded by Dynamo)."""
    folded, guarded = folded_tables()
    out = {}
    for fn in folded:
        name = query_name(fn)
        if fn not in guarded and name not in PURE:
            out[fn] = name
    return out


@functools.cache
def _by_name() -> dict[str, Any]:
    return {name: fn for fn, name in stateful_queries().items()}


class Unrecordable(Exception):
    """A folded query whose call cannot be repeated in another process (an argument that is not a constant)."""


def constant_args(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The Python constants of Dynamo's argument variables; Unrecordable when one is not a constant."""
    try:
        values = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
    except Exception as e:
        raise Unrecordable(f"an argument that is not a constant ({type(e).__name__})") from None
    for v in [*values, *named.values()]:
        _encode(v)  # raises Unrecordable for what cannot be written down
    return values, named


def record_call(queries: dict[str, list[Any]], fn: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Adds one folded call to `queries` ({id: [name, args, kwargs]}, encoded)."""
    name = stateful_queries().get(fn)
    if name is None:
        return
    values, named = constant_args(args, kwargs)
    call = [name, [_encode(v) for v in values], {k: _encode(v) for k, v in sorted(named.items())}]
    queries[json.dumps(call, sort_keys=True)] = call


def answers(queries: dict[str, list[Any]]) -> list[list[Any]]:
    """[[name, args, kwargs, answer text], ...] of the recorded calls, answered in this process now."""
    return [[*queries[k], _answer(*queries[k])] for k in sorted(queries)]  # keys: the calls' JSON


def _answer(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    fn = _by_name().get(name)
    if fn is None:
        return "<not a query in this torch>"
    try:
        value = fn(*[_decode(a) for a in args], **{k: _decode(v) for k, v in kwargs.items()})
    except Exception as e:
        return f"<raised {type(e).__name__}>"
    return _text(value)


def queries_changed(recorded: list[list[Any]]) -> str | None:
    for name, args, kwargs, answer in recorded:
        now = _answer(name, args, kwargs)
        if now != answer:
            return f"{name}({', '.join(map(str, args))}) answered {answer} when recorded, {now} now"
    return None


# ---- global state ---------------------------------------------------------------------------------------------------
def global_state_snapshot(output_graph: Any = None) -> str:
    """The state Dynamo's GLOBAL_STATE guard compares, as the trace's guard saw it (its snapshot when the output
    graph has one, else this process's now)."""
    guard = getattr(output_graph, "global_state_guard", None) if output_graph is not None else None
    if guard is None:
        guard = dynamo_glue.GlobalStateGuard()
    return guard.__getstate__()


def global_state_now() -> str:
    return dynamo_glue.GlobalStateGuard().__getstate__()


def compile_state_digest() -> str:
    """Digest of what compiling a graph reads from the process (the graph key's autograd-state component)."""
    from aotcache import global_state

    text = json.dumps(global_state.autograd_state(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# ---- values ---------------------------------------------------------------------------------------------------------
def _encode(value: Any) -> Any:
    """A constant argument as JSON: plain values as they are (floats by their bits), torch's enums by name."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return {"float": struct.pack("<d", value).hex()}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if type(value) in (list, tuple):
        return {type(value).__name__: [_encode(v) for v in value]}
    raise Unrecordable(f"a {type(value).__qualname__} argument")


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    ((kind, inner),) = value.items()
    if kind == "float":
        return struct.unpack("<d", bytes.fromhex(inner))[0]
    if kind == "dtype":
        return getattr(torch, inner)
    if kind == "device":
        return torch.device(inner)
    items = [_decode(v) for v in inner]
    return tuple(items) if kind == "tuple" else items


def _text(value: Any) -> str:
    from aotcache.frames import read_set

    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return read_set.scalar_text(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return f"{type(value).__name__}:{value}"
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"


# ---- the check on load ----------------------------------------------------------------------------------------------
FACT_NAMES = ("queries", "global_state", "compile_state")


def facts(queries: dict[str, list[Any]], output_graph: Any) -> dict[str, Any]:
    """What a recorded frame carries of the process: its folded queries answered, the global state its guard saw,
    the compile state of its graphs."""
    return {
        "queries": answers(queries),
        "global_state": global_state_snapshot(output_graph),
        "compile_state": compile_state_digest(),
    }


def facts_changed(recorded: dict[str, Any]) -> str | None:
    """None when this process is in the state the frame was recorded in; else what differs. A candidate without
    these facts (none of this format lacks them) is never served."""
    if any(name not in recorded for name in FACT_NAMES):
        return "the candidate carries no process state"
    changed = queries_changed(recorded["queries"])
    if changed:
        return changed
    if recorded["global_state"] != global_state_now():
        return f"global state {recorded['global_state']} when recorded, {global_state_now()} now"
    if recorded["compile_state"] != compile_state_digest():
        return "the compile state (autograd state, attention backends, matmul precision...) differs"
    return None
