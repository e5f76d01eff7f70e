"""Recording a frame Dynamo traced: the state of the recording (guards serialized with save_guards, the read set,
the process-wide facts, the queries Dynamo folded, rolled-back attempts), the candidate built from it (or the
reason it cannot be: `Refused`), checked loadable, and persisted into the frame's entry; the verifier's comparison
of a served candidate with the trace."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import time
import types
import warnings
from typing import Any

from aotcache.capture import code_digest
from aotcache.frames import (
    code_codec,
    content,
    counting,
    ddp_split,
    dynamic_state,
    entry,
    guards,
    process_state,
    read_set,
    serve,
    verify,
)
from aotcache.frames.frame_key import Frame
from aotcache.pipeline import tags
from aotcache.storage import single_flight
from aotcache.torch_glue import dynamo as dynamo_glue

log = logging.getLogger("aotcache")


class Refused(Exception):
    """The frame cannot be frame-cached; `code` is the counted reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass
class Recording:
    frame: Frame
    guards_state: bytes | None = None
    output_graph: Any = None
    markings: dict[str, Any] = dataclasses.field(default_factory=dict)  # mark_dynamic & co of the guarded tensors
    output_graph_live: Any = None  # while its guards are built: the storage-partition guard reads its graph inputs
    reads: list[list[str]] = dataclasses.field(default_factory=list)  # read_set.record: what the trace read
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # read_set.facts at the trace
    guard_names: set[str] = dataclasses.field(default_factory=set)  # the source names of every guard Dynamo built
    traced: list[str] = dataclasses.field(default_factory=list)  # read_set.traced_names of the trace
    # The guards of each tracing attempt Dynamo rolled back (a graph break restarts the trace; one inside an inlined
    # call makes the next attempt break at the outermost call): what decided the break was read there.
    rolled_back: list[Any] = dataclasses.field(default_factory=list)
    rolled_back_reads: list[list[str]] = dataclasses.field(default_factory=list)
    # The process-state queries Dynamo folded while tracing (process_state.record_call).
    queries: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    refused: Refused | None = None

    def refuse(self, code: str, message: str) -> None:
        if self.refused is None:
            self.refused = Refused(code, message)


_state = threading.local()


def current() -> Recording | None:
    stack = getattr(_state, "recordings", None)
    return stack[-1] if stack else None


def serialize_recorded(
    rec: Recording, original_serialize: Any, manager: Any, builder: Any, sorted_guards: Any, output_graph: Any
) -> bytes:
    """Dynamo's serialization of a recorded frame's guards, after: the process-wide facts and the read set recorded
    (read_set.py), identity guards made content guards, one user frame kept per guard, the storage-partition guard
    added, dimension markings taken. Raises Refused or content.Unportable when the frame cannot be carried."""
    rec.facts = read_set.facts()
    if rec.facts["global_module_hooks"]:
        raise Refused("global_hooks", "global nn.Module hooks are registered: the trace inlined them")
    live = rec.output_graph_live or output_graph
    rec.facts.update(process_state.facts(rec.queries, live))
    rec.traced = read_set.traced_names(live.tracing_context.traced_code)
    # The sets and dicts the trace iterated: their order is what the program saw (read_set.ORDER_KIND).
    iterated = getattr(live, "guard_on_key_order", ())
    rec.reads = read_set.record(builder, sorted_guards, rec.traced, iterated=iterated)
    rec.guard_names = {g.name for g in sorted_guards if g.name}
    context = dynamo_glue.CompileContext.try_get()
    attempts = getattr(context, "attempt", 0) or 0
    if attempts > len(rec.rolled_back):
        raise Refused("rolled_back_unseen", f"{attempts} tracing attempts rolled back, {len(rec.rolled_back)} seen")
    if rec.rolled_back:
        # Fingerprinted in full (no `traced` filter): the code the attempt was inlining when it broke never finished,
        # so Dynamo's traced_code does not name it.
        rolled = [g for attempt in rec.rolled_back for g in attempt]
        final = {tuple(row) for row in rec.reads}  # a row the final read set has is checked there
        rows = read_set.record(builder, rolled, None, rolled_back=True)
        rec.rolled_back_reads = [row for row in rows if tuple(row) not in final]
        rec.guard_names |= {row[0] for row in rec.rolled_back_reads}
    kept_stacks: dict[tuple, Any] = {}
    carried = [guards.without_stacks(guards.portable(builder, g), kept_stacks) for g in sorted_guards]
    carried = guards.grouped_hook_guards(carried)
    carried.append(guards.storage_partition_guard(builder, live, rec.frame.f_globals))
    meshes = guards.mesh_guard(builder, live, rec.frame.f_globals)
    if meshes is not None:
        carried.append(meshes)
    rec.markings = guards.dimension_markings(builder, sorted_guards)
    guards.keep_builtins(manager, carried, output_graph)
    return original_serialize(manager, builder, carried, output_graph)


def record(rec: Recording, result: Any, seconds: float) -> None:
    candidate, manager = candidate_of(rec, result)
    serve.remember_built(rec.frame, candidate["guards"], manager)  # a later compile of the code checks it first
    persist(rec.frame, candidate, seconds)


def verify_served(rec: Recording, result: Any, served: dict[str, Any]) -> None:
    """Verify mode: `served` (the candidate the cache had for this call) against Dynamo's own trace of it (`rec`,
    `result`), counted and logged; Dynamo's result runs either way."""
    frame = rec.frame
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh, _ = candidate_of(rec, result, comparing=True)
            differences = verify.differences(served, fresh)
    except Refused as r:
        differences = [f"Dynamo's trace is not a frame entry ({r.code}: {r})"]
    except Exception as e:
        counting.internal_error("verify", e, frame)
        return
    if differences:
        counting.count({"frames.verify.mismatch": 1}, frame)
        log.warning(
            "frame verify mismatch %s key=%s: the served entry differs from Dynamo's trace: %s",
            counting.frame_name(frame.code),
            frame.key.hex[:16],
            "; ".join(differences),
        )
    else:
        counting.count({"frames.verify.match": 1}, frame)


# What the recorder refuses out of caution rather than because the trace cannot be described: the trace may have
# read something no guard covers (an environment variable, an assume_constant_result value), perhaps only in an
# inlining attempt Dynamo rolled back. The verifier still builds such a trace's candidate: whatever the trace baked in
# shows in its code, guards or graph keys, which it compares with the served entry's.
_CAUTIOUS = frozenset({"assume_constant_result", "environ"})


def candidate_of(rec: Recording, result: Any, comparing: bool = False) -> tuple[dict[str, Any], Any]:
    """The frame entry candidate of a trace, and the guard manager rebuilt from it. Raises Refused. `comparing`
    (the verifier) builds it despite the cautious refusals."""
    frame = rec.frame
    guarded = getattr(result, "guarded_code", None)
    if guarded is None:  # Dynamo skipped the frame (no graph, or it runs the frame as it is): nothing to replay
        raise Refused("no_code", "Dynamo made no code for the frame")
    if rec.refused is not None and not (comparing and rec.refused.code in _CAUTIOUS):
        raise rec.refused
    if rec.guards_state is None or rec.output_graph is None:
        raise Refused("guards", "Dynamo did not serialize the frame's guards")
    output_graph = rec.output_graph
    frame_digest = content.code_digest(frame.code)
    renames: dict[str, str] = {}
    specs: dict[str, dict[str, Any]] = {}
    builtins_name = getattr(output_graph, "name_of_builtins_dict_key_in_fglobals", None)
    for name in sorted(output_graph.installed_globals):
        spec = _describe_global(name, frame.f_globals.get(name), builtins_name)
        if spec["kind"] in ("graph", "function", "split"):  # Dynamo's names hold a uuid or a process-wide counter
            if spec["kind"] == "graph":
                what = spec["key"]
            elif spec["kind"] == "split":
                what = json.dumps(spec, sort_keys=True)
            else:
                what = content.code_digest(spec["code_object"])
            digest = hashlib.sha256(f"{frame.key.hex}:{spec['kind']}:{what}".encode()).hexdigest()
            renames[name] = f"__aotcache_{spec['kind']}_{digest[:24]}"
        specs[renames.get(name, name)] = spec
    # Import aliases Dynamo put into the module's globals itself (not through installed_globals); the guards and
    # the transformed code read through them. Deterministic names: carried as they are. Only those this frame's code
    # or guards name: the module's globals also hold the aliases of its other frames.
    code_names = code_digest.global_names(guarded.code)
    for name, value in list(frame.f_globals.items()):
        if name.startswith("__import_") and name not in specs and isinstance(value, types.ModuleType):
            quoted = f"G[{name!r}]"
            if name in code_names or any(quoted in g for g in rec.guard_names):
                specs[name] = _describe_global(name, value, builtins_name)
    for spec in specs.values():
        if spec["kind"] == "function":
            spec["code"] = _dump_code(_renamed(spec.pop("code_object"), renames))
    sources = set()
    environ = _environ_codes()
    for code in output_graph.tracing_context.traced_code:
        if code in environ:
            if comparing:
                continue
            # Dynamo reads the value for real and guards nothing: which variable, the trace does not say.
            raise Refused("environ", f"the trace read the environment ({code.co_qualname})")
        if content.code_digest(code) == frame_digest or code.co_name.startswith("torch_dynamo_resume_in_"):
            continue
        try:
            sources.add(content.source_of(code))
        except content.Unportable as e:
            raise Refused("inlined_source", str(e)) from None
    manager = _check_loadable(frame, rec.guards_state, rec.markings)
    unstable = read_set.changed(rec.reads, frame.f_locals, frame.f_globals, rec.traced) or read_set.rolled_back_changed(
        rec.rolled_back_reads, frame.f_locals, frame.f_globals
    )
    if unstable is not None:  # a content that differs from itself would never let the frame load
        raise Refused("reads_unstable", f"the read set does not hold for the call traced: {unstable}")
    candidate = {
        "guards": entry.b64(rec.guards_state),
        "code": _dump_code(_renamed(guarded.code, renames)),
        "globals": specs,
        "sources": sorted([list(s) for s in sources]),
        "automatic_dynamic": dynamic_state.snapshot(frame.code, frame.closure),
        "markings": rec.markings,
        "reads": rec.reads,
        "rolled_back_reads": rec.rolled_back_reads,
        "traced": rec.traced,
        "facts": rec.facts,
    }
    return candidate, manager


@functools.cache
def _environ_codes() -> frozenset[types.CodeType]:
    """The code of os.environ's reads and os.getenv: a trace that inlined one read an environment variable."""
    codes = {os.getenv.__code__}
    for name in ("__getitem__", "__iter__", "__len__"):
        fn = vars(os._Environ).get(name)
        if isinstance(fn, types.FunctionType):
            codes.add(fn.__code__)
    return frozenset(codes)


def _check_loadable(frame: Frame, guards_state: bytes, markings: dict[str, Any]) -> Any:
    """Rebuilds the guards from their serialized form, as a load would, and checks them on the call just traced
    (the manager is returned):
    Dynamo serializes some values it cannot pickle as placeholders (torch's _Missing), and guards built on them
    fail; a guard rebuilt from a serialized value that lost something the guard reads (a tensor's dimension
    markings, say) would reject the very call it was traced for. Such a frame is not recorded."""
    from aotcache.torch_glue.dispatch import FakeTensorMode
    from aotcache.torch_glue.dynamo import TracingContext, load_guard_manager, load_guards_state, tracing

    try:
        with tracing(TracingContext(FakeTensorMode())):
            state = load_guards_state(guards_state)
        guards.restore_markings(state, markings)
        manager = load_guard_manager(state, frame.code, frame.f_globals)
    except Exception as e:
        raise Refused("guards_unloadable", f"its serialized guards do not rebuild: {type(e).__name__}: {e}") from None
    if not manager.check(frame.f_locals):
        failed = manager.check_verbose(frame.f_locals).verbose_code_parts
        raise Refused("guards_reject_call", f"its rebuilt guards reject the call traced: {failed}")
    return manager


def _describe_global(name: str, value: Any, builtins_name: str | None) -> dict[str, Any]:
    if name == builtins_name:
        return {"kind": "builtins"}
    if isinstance(value, types.ModuleType):
        import sys

        if sys.modules.get(value.__name__) is value:
            return {"kind": "module", "name": value.__name__}
    from aotcache.torch_glue.dynamo import innermost_fn

    tagged = tags.lookup(innermost_fn(value)) if callable(value) else None
    if tagged is not None:
        return {"kind": "graph", **tagged}
    split = ddp_split.split_module(value)
    if split is not None:
        try:
            return {"kind": "split", **ddp_split.describe(split, lambda fn: tags.lookup(innermost_fn(fn)))}
        except ddp_split.Unsupported as e:
            raise Refused("ddp_split", f"the DDP optimizer's split of {name}: {e}") from None
    if isinstance(value, types.FunctionType) and value.__code__.co_name.startswith("torch_dynamo_resume_in_"):
        return {"kind": "function", "name": value.__name__, "code_object": value.__code__}
    if isinstance(value, types.FunctionType) and value.__qualname__.endswith(
        "install_resume_function_global.<locals>._make_fn"
    ):
        # The resume function of a frame with free variables: Dynamo installs a factory taking the closure.
        cells = dict(zip(value.__code__.co_freevars, value.__closure__ or ()))
        code = cells["code"].cell_contents if "code" in cells else None
        if not isinstance(code, types.CodeType) or not code.co_name.startswith("torch_dynamo_resume_in_"):
            raise Refused("global", f"resume factory {name} has an unexpected shape")
        return {"kind": "function", "name": name, "code_object": code, "factory": True}
    if callable(value) and name.startswith("__compiled_fn"):
        raise Refused("graph_not_cached", f"graph {name} has no cache entry (bypassed or bound to lifted state)")
    raise Refused("global", f"Dynamo installed {name}, a {type(value).__qualname__} a frame entry cannot carry")


def _dump_code(code: types.CodeType) -> dict[str, Any]:
    try:
        data, constants = code_codec.dump(code)
    except content.Unportable as e:
        raise Refused("constant", str(e)) from None
    return {"marshal": entry.b64(data), "constants": constants}


def _renamed(code: types.CodeType, renames: dict[str, str]) -> types.CodeType:
    consts = tuple(_renamed(c, renames) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_names=tuple(renames.get(n, n) for n in code.co_names), co_consts=consts)


def persist(frame: Frame, candidate: dict[str, Any], seconds: float) -> None:
    # Read, add and write under the key's lock: ranks of one job record different candidates of one frame at once
    # (one per tensor-parallel group: their meshes differ), and a plain read-modify-write keeps only the last one.
    with single_flight.exclusive(frame.tiers.local, frame.key.hex):
        found = frame.tiers.get_local(frame.key.hex)
        known: list[dict[str, Any]] = []
        if found.entry is not None:
            try:
                known = entry.decode(found.entry.payload)
            except ValueError:
                known = []
        elif not found.writable:
            raise Refused("not_writable", "the frame's key holds an entry this process may not replace")
        # A candidate with the same code, globals and sources is replaced (its guards failed, or they are Dynamo's
        # guards for other sizes of the same graphs): the newest serves, the entry does not fill up with twins.
        same = ("code", "globals", "sources")
        known = [c for c in known if any(c.get(k) != candidate[k] for k in same)]
        known.append(candidate)
        metadata = {"created_unix": int(time.time()), "payload_kind": entry.KIND, "compile_seconds": float(seconds)}
        frame.tiers.put(frame.key, entry.encode(known), metadata, b"", b"")
    counting.count({"frames.recorded": 1}, frame)
    log.info("frame recorded %s key=%s candidates=%d", counting.frame_name(frame.code), frame.key.hex[:16], len(known))
