"""The frame verifier's comparison: a served frame entry candidate against the candidate Dynamo's own trace of the same
call makes (`AOTCACHE_FRAMES_VERIFY=1`, record.verify_served). Equal means the cache served exactly what this process
would have produced by compiling: the same transformed bytecode, the same globals (graphs by their entry keys,
resume functions by code), the same inlined sources and read set, and the same guards (by source and kind, content
guards by their description).

Names that hold a process-wide counter are normalized first: Dynamo's builtins dict global
(`__builtins_dict___<n>`), a resume function's `__name__` (`__resume_at_<offset>_<n>`) and a module global
(`___module_<name>_<id>_c<n>`, by the module's id() and a counter) are numbered per process.
"""

from __future__ import annotations

import functools
import re
import types
from typing import Any

from aotcache.frames import code_codec, entry, guards

_COUNTED = re.compile(r"__builtins_dict___\d+")
# Dynamo names a global it installs by id (install_global_by_id: `<prefix>_<id()>_c<compile number>`, the prefix
# `___module_<m>` for a module, empty for others); what it holds is the global's description (kind module, by name),
# compared apart, so both numbers go.
_BY_ID = re.compile(r"_\d+_c\d+(?!\w)")


def _normal(text: str) -> str:
    return _BY_ID.sub("_ID_cN", _COUNTED.sub("__builtins_dict___N", text))


def _code(spec: dict[str, Any]) -> tuple:
    code = code_codec.load(entry.unb64(spec["marshal"]), spec["constants"])
    return _code_shape(code), repr(spec["constants"])


def _code_shape(code: types.CodeType) -> tuple:
    consts = tuple(_code_shape(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return (
        code.co_code,
        tuple(_normal(n) for n in code.co_names),
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        consts,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_flags,
    )


def _globals(specs: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, spec in specs.items():
        spec = dict(spec)
        if "code" in spec:
            spec["code"] = _code(spec["code"])
        if spec.get("kind") == "function":
            spec.pop("name", None)  # a resume function's __name__ holds Dynamo's per-process counter
        out[_normal(name)] = spec
    return out


def _guard_set(guards_b64: str) -> set[tuple]:

    from aotcache.torch_glue.dispatch import FakeTensorMode
    from aotcache.torch_glue.dynamo import TracingContext, load_guards_state, tracing

    with tracing(TracingContext(FakeTensorMode())):
        state = load_guards_state(entry.unb64(guards_b64))
    out = set()
    for g in state.output_graph._guards:
        fn = g.create_fn
        if isinstance(fn, functools.partial) and fn.func is guards.aotcache_content_match:
            kind = ("content", fn.args[0], repr(fn.args[1]))
        elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_storage_partition:
            kind = ("storage_partition", repr(fn.args))
        elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_meshes:
            kind = ("meshes", repr(fn.args))
        elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_length_match:
            kind = ("length", repr(fn.args))
        elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_empty_hooks:
            kind = ("empty_hooks", repr(fn.args))
        else:
            kind = (g.create_fn_name(),)
        out.add((_normal(g.name), *kind))
    return out


def differences(served: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """What differs between two candidates of one frame key, in words ([] when nothing does)."""
    out = []
    if _code(served["code"]) != _code(fresh["code"]):
        out.append("transformed bytecode")
    a, b = _globals(served["globals"]), _globals(fresh["globals"])
    if a != b:
        names = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
        out.append(f"globals {names}")
    sa, sb = set(map(tuple, served["sources"])), set(map(tuple, fresh["sources"]))
    if sa != sb:
        out.append(f"inlined sources (served only: {sorted(sa - sb)}, traced only: {sorted(sb - sa)})")
    for field, what in (("reads", "read set"), ("rolled_back_reads", "rolled-back read set")):
        ra = {(_normal(r[0]), *r[1:]) for r in served.get(field, [])}
        rb = {(_normal(r[0]), *r[1:]) for r in fresh.get(field, [])}
        if ra != rb:
            out.append(f"{what} (served only: {sorted(ra - rb)[:5]}, traced only: {sorted(rb - ra)[:5]})")
    if served.get("facts") != fresh.get("facts"):
        out.append(f"facts {served.get('facts')} != {fresh.get('facts')}")
    ga, gb = _guard_set(served["guards"]), _guard_set(fresh["guards"])
    if ga != gb:
        out.append(f"guards (served only: {sorted(ga - gb)[:5]}, traced only: {sorted(gb - ga)[:5]})")
    if served.get("markings", {}) != fresh.get("markings", {}):
        out.append("dimension markings")
    return out
