"""Serving a frame: its entry read, each candidate checked in turn (sources unchanged, process-wide facts, the read
set, the guards rebuilt by Dynamo and checked on the call), the first that holds installed (graphs loaded from their
entries through pipeline/load.py, resume functions, import aliases) and returned as Dynamo's own result."""

from __future__ import annotations

import functools
import importlib
import itertools
import logging
import sys
import time
import types
import weakref
from typing import Any

from aotcache.frames import (
    code_codec,
    content,
    counting,
    ddp_split,
    dynamic_state,
    entry,
    guard_log,
    guards,
    process_state,
    read_set,
)
from aotcache.frames.frame_key import Frame
from aotcache.pipeline import load as graph_load
from aotcache.torch_glue import dynamo as dynamo_glue

log = logging.getLogger("aotcache")


def load(frame: Frame, compile_id: Any) -> Any:
    t0 = time.perf_counter()
    found = frame.tiers.get(frame.key.hex).entry
    if found is None:
        counting.count({"frames.misses": 1, "frames.miss.no_entry": 1}, frame)
        return None
    candidates = entry.decode(found.payload)
    reasons = []
    # Oldest first: a process that makes the same calls as the one that recorded the frames gets the same frames in
    # the same order (a static graph before the symbolic one that followed it), so the same results, bit for bit.
    for candidate in candidates:
        result, reason = _try_candidate(frame, candidate, compile_id)
        if result is not None:
            graphs = sum(
                1 if spec["kind"] == "graph" else len(spec["pieces"]) if spec["kind"] == "split" else 0
                for spec in candidate["globals"].values()
            )
            counting.count({"frames.hits": 1, "frames.graphs": graphs}, frame, defer=True)
            log.info(
                "frame hit %s key=%s load=%.1fms",
                counting.frame_name(frame.code),
                frame.key.hex[:16],
                1e3 * (time.perf_counter() - t0),
            )
            return result, candidate
        reasons.append(reason)
    counting.count({"frames.misses": 1, **{f"frames.miss.{r}": 1 for r in set(reasons)}}, frame)
    log.info("frame miss %s key=%s: %s", counting.frame_name(frame.code), frame.key.hex[:16], ", ".join(reasons))
    return None


# The guard managers this process built for the candidates of each code object, by the candidate's serialized guards.
# Dynamo calls the compile of a frame only when every guard manager it holds for the code failed on the call: a
# candidate served earlier in the process (its manager among those) and one whose guards failed earlier would
# otherwise be unpickled and built again only to fail again (gpt2:generate's decode steps: 0.05 s each). Checking
# the manager built then decides it, as Dynamo's cache entries are checked. One that holds goes the full way.
_built: weakref.WeakKeyDictionary[types.CodeType, dict[str, Any]] = weakref.WeakKeyDictionary()


def remember_built(frame: Frame, guards_text: str, manager: Any) -> None:
    _built.setdefault(frame.code, {})[guards_text] = manager


def _fails_again(frame: Frame, candidate: dict[str, Any]) -> bool:
    """Whether the guard manager built earlier in this process for this candidate fails on this call."""
    manager = _built.get(frame.code, {}).get(candidate["guards"])
    if manager is None:
        return False
    try:
        return not manager.check(frame.f_locals)
    except Exception:  # a manager that cannot say: build the candidate's guards again
        return False


def _try_candidate(frame: Frame, candidate: dict[str, Any], compile_id: Any) -> tuple[Any, str]:
    from aotcache.torch_glue.dispatch import FakeTensorMode
    from aotcache.torch_glue.dynamo import (
        GuardedCode,
        TracingContext,
        get_builtins_dict,
        load_guard_manager,
        load_guards_state,
        tracing,
        wrap_guarded_code,
    )

    if _fails_again(frame, candidate):
        counting.count({"frames.known_failing": 1}, frame)
        return None, "guards_failed"
    if not content.sources_unchanged(candidate["sources"]):
        return None, "sources_changed"
    changed_fact = read_set.facts_changed(candidate["facts"]) or process_state.facts_changed(candidate["facts"])
    if changed_fact is not None:
        log.debug("frame %s not served: %s", counting.frame_name(frame.code), changed_fact)
        return None, "facts_changed"
    # What the trace read, by content (read_set.py): Dynamo rebuilds its guards from the objects this process has (a
    # module, a class, a function's globals are this process's own), so they would hold for whatever those hold now.
    # Checked on a view of the module's globals with the candidate's import aliases and builtins dict, installed for
    # real only once it holds (a candidate of another module's code must leave nothing behind).
    scope = frame.f_globals
    extra: dict[str, Any] = {}
    for name, spec in candidate["globals"].items():
        if spec["kind"] == "module" and name not in scope:
            module = sys.modules.get(spec["name"])
            if module is None:  # a module this process has not imported: its trace here could not have read it
                return None, "reads_changed"
            extra[name] = module
        elif spec["kind"] == "builtins" and name not in scope:
            from aotcache.torch_glue.dynamo import get_builtins_dict

            extra[name] = get_builtins_dict(scope)
    view = {**scope, **extra} if extra else scope
    changed_read = read_set.changed(
        candidate["reads"], frame.f_locals, view, candidate.get("traced")
    ) or read_set.rolled_back_changed(candidate["rolled_back_reads"], frame.f_locals, view)
    if changed_read is not None:
        log.debug("frame %s not served: %s", counting.frame_name(frame.code), changed_read)
        return None, "reads_changed"
    # Some sources install a guard when they are built (ImportSource: ID_MATCH on the module), unpickling too: give
    # them a scratch tracing context. The guard they meant is in the serialized list already, as a content guard.
    with tracing(TracingContext(FakeTensorMode())):
        guards_state = load_guards_state(entry.unb64(candidate["guards"]))
    guards.restore_markings(guards_state, candidate.get("markings", {}))
    builtins_name = guards_state.output_graph.name_of_builtins_dict_key_in_fglobals
    added_builtins = False
    if builtins_name and builtins_name not in scope:
        scope[builtins_name] = extra.get(builtins_name) or get_builtins_dict(scope)
        added_builtins = True
    # Import aliases: the guards read attributes through them.
    for name, value in extra.items():
        if name != builtins_name:
            scope[name] = value
    # Building the guards reads the live objects some sources name (the dicts whose key order is guarded, through
    # the module globals): a source this process's state lacks (a registry dict with fewer entries than when the
    # frame was recorded) raises here instead of failing a check. Either way the guards do not hold for this call.
    _trace_served(frame)
    try:
        guard_manager = load_guard_manager(guards_state, frame.code, scope)
        remember_built(frame, candidate["guards"], guard_manager)
        failed = None if guard_manager.check(frame.f_locals) else "check"
    except Exception as e:
        failed = f"{type(e).__name__}: {e}"
    if guard_log.GUARD_LOG:
        guard_log.log_guards("loaded", frame.code, guards_state.output_graph._guards)
    if added_builtins:
        # Kept installed (as Dynamo keeps its own): the guard manager remembered for this candidate reads it.
        _reserve_unique_id(builtins_name)
    if failed is not None:
        if log.isEnabledFor(logging.DEBUG):
            why = guard_manager.check_verbose(frame.f_locals) if failed == "check" else failed
            log.debug("frame %s guards failed: %s", counting.frame_name(frame.code), why)
        return None, "guards_failed"
    values, loaded = {}, []
    for name, spec in candidate["globals"].items():
        if spec["kind"] == "module":
            continue
        value = _global_value(frame, spec, loaded)
        if value is None:
            return None, "graph_evicted"
        values[name] = value
    # Counted once the frame is served: a graph loaded for a candidate that then fails is traced and counted again.
    for delta in loaded:
        counting.count(delta, frame, defer=True)
    automatic_dynamic = dynamic_state.decode(candidate.get("automatic_dynamic", {}))
    scope.update(values)
    code = load_code(candidate["code"])
    # What Dynamo records of each code it makes: the original (recompilation reasons read it) and that it is
    # generated (a frame of it is never converted again).
    from aotcache.torch_glue.dynamo import convert_frame, orig_code_map

    orig_code_map[code] = frame.code
    convert_frame.output_codes.add(code)
    dynamic_state.merge(frame.code, frame.closure, automatic_dynamic)
    return wrap_guarded_code(GuardedCode(code, guard_manager, compile_id, "Torch-Compiled Region: aotcache frame")), ""


def _trace_served(frame: Frame) -> None:
    """A structured-trace event for the frame about to be served (tlparse shows it under TORCH_TRACE), sent before
    its guard manager is built. Torch keeps a lazy trace handler until a process's first event, which then decides
    whether tracing is on (off: the handler removes itself); while it is there, every event's payload is made. A
    served frame's first event would otherwise be Dynamo's text of the whole guard tree (`dynamo_cpp_guards_str`,
    65 ms for GPT-2 124M's frame), made for nothing when no trace is written."""
    try:
        dynamo_glue.trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": "aotcache_frame_served", "encoding": "string"},
            payload_fn=lambda: counting.frame_name(frame.code),
        )
    except Exception:  # a logging API of another shape: the guard text is made, nothing else changes
        log.debug("no structured-trace event for a served frame", exc_info=True)


def _resume_factory(code: types.CodeType, f_globals: dict[str, Any], name: str) -> Any:
    """What Dynamo installs for a resume function with free variables: a factory that takes the closure."""

    def make(closure: tuple[types.CellType, ...]) -> types.FunctionType:
        return types.FunctionType(code, f_globals, name, None, closure)

    # Dynamo's own factory lies in its skipped files; this one would be traced as a frame of its own when the served
    # code calls it (a miss, and a frame that cannot be recorded): its code is skipped the same way.
    if _skip_code(make.__code__):
        return make
    return dynamo_glue.disable(make, reason="aotcache's resume function factory")


@functools.cache
def _skip_code(code: types.CodeType) -> bool:
    try:
        from aotcache.torch_glue.dynamo import skip_code

        skip_code(code)
        return True
    except Exception:
        return False


def _reserve_unique_id(name: str) -> None:
    """Dynamo names the globals it installs `<prefix>_<n>` from one process-wide counter and refuses a name that
    exists: after installing a recorded `..._<n>`, move the counter past n so Dynamo never makes that name again."""
    from aotcache.torch_glue.dynamo import bytecode_transformation

    number = name.rsplit("_", 1)[-1]
    if number.isdigit():
        current = next(bytecode_transformation._unique_id_counter)
        bytecode_transformation._unique_id_counter = itertools.count(max(current, int(number) + 1))


def _load_graph(frame: Frame, spec: dict[str, Any], loaded: list[dict[str, int]]) -> Any:
    """The callable of one graph entry a frame references (None when it is gone); its counters (a hit) are appended
    to `loaded`."""
    found = frame.tiers.get(spec["key"]).entry
    if found is None:
        return None
    if spec.get("index"):  # its guard index stays as fresh as the candidate, or eviction takes it first
        frame.tiers.local.mark_used(spec["index"])
    t0 = time.perf_counter()
    metadata = found.metadata if isinstance(found.metadata, dict) else {}
    fn, delta = graph_load.callable_of(found, frame.cfg)
    # The graph is served from the cache: a hit, as if Dynamo had traced it and the backend had found it.
    saved_us = int(1e6 * float(metadata.get("compile_seconds", 0.0)))
    load_us = int(1e6 * (time.perf_counter() - t0))
    loaded.append({**delta, "hits": 1, "bytes_read": len(found.payload), "load_us": load_us, "saved_us": saved_us})
    if spec["single"]:
        inner = fn

        def fn(*args: Any) -> Any:
            return inner(*args)[0]

    return fn


def _global_value(frame: Frame, spec: dict[str, Any], loaded: list[dict[str, int]]) -> Any:
    """The value of one global the frame's bytecode reads; a graph's counters (a hit) are appended to `loaded`."""
    kind = spec["kind"]
    if kind == "graph":
        fn = _load_graph(frame, spec, loaded)
        return None if fn is None else dynamo_glue.disable(fn, reason="do not trace Dynamo-compiled graph")
    if kind == "split":
        pieces = {}
        for target, piece in spec["pieces"].items():
            pieces[target] = _load_graph(frame, piece, loaded)
            if pieces[target] is None:
                return None
        return dynamo_glue.disable(ddp_split.build(spec, pieces), reason="do not trace Dynamo-compiled graph")
    if kind == "function":
        code = load_code(spec["code"])
        if spec.get("factory"):
            return _resume_factory(code, frame.f_globals, spec["name"])
        return types.FunctionType(code, frame.f_globals, spec["name"])
    if kind == "module":
        return importlib.import_module(spec["name"])
    if kind == "builtins":
        from aotcache.torch_glue.dynamo import get_builtins_dict

        return get_builtins_dict(frame.f_globals)
    raise ValueError(f"unknown global kind {kind!r}")


def load_code(spec: dict[str, Any]) -> types.CodeType:
    return code_codec.load(entry.unb64(spec["marshal"]), spec["constants"])
