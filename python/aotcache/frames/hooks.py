"""The frame cache's hooks into Dynamo (torch 2.13-2.15), and the load and record paths they run.

- `convert_frame._compile` (Dynamo's compile of one frame): for a frame compiled for backend "aotcache" with
  frames on, the frame's entry is looked up first (key: the code by content, the module, configs, environment,
  salt). A candidate whose inlined sources are unchanged and whose guards hold for this call has its globals
  installed (graphs loaded from their entries, resume functions, import aliases) and is returned as Dynamo's own
  result: the frame runs without tracing. Otherwise Dynamo traces as always and the result is recorded.
- `convert_frame.CheckFunctionManager`: while a frame is recorded, its guards are built with save_guards=True, so
  Dynamo serializes them; `CheckFunctionManager.serialize_guards`: identity guards become content guards first
  (guards.py). A frame whose guards cannot be serialized in full is not recorded (counted with the reason).
- `GuardsStatePickler.reducer_override`: while a frame is recorded, a function under a functools.wraps decorator is
  pickled by the decorated name and its `__wrapped__` depth (Dynamo's pickler leaves it out), and a module FSDP2
  sharded is rebuilt as an instance of its FSDP class (pickle's default rebuilds the original class).
- `invoke_and_store_as_constant` (assume_constant_result): a trace that calls one is not recorded.
- `DynamoTracerOutput._cleanup_output_graph`: the guards of each tracing attempt Dynamo rolls back (a graph break
  restarts the trace) are kept for the frame's `rolled_back_reads`; without this hook, a frame traced after a
  restart is not recorded.

The internals are looked up, and checked for the shape the hooks need, before any is replaced (`torch_internals`,
feature `frame_cache`): on a torch that fails the check, none is installed, the frame cache is off for the process
with one WARNING naming what failed (`unavailable`), and the graph cache works as always
(tests/python/test_torch_internals.py removes or changes each in turn).

Every failure of ours is a fallback to Dynamo's own path, counted `frames.internal_error.<phase>`; counters
`frames.hits`, `frames.misses`, `frames.recorded`, `frames.bypass.<reason>`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import inspect
import itertools
import json
import logging
import os
import sys
import threading
import time
import types
import warnings
import weakref
from typing import Any

import torch

from aotcache import (
    _core,
    code_digest,
    compiler,
    counters,
    default_backend,
    global_state,
    isa_probe,
    kernels,
    settings,
    single_flight,
    torch_internals,
)
from aotcache.errors import Bypass
from aotcache.frames import (
    code_codec,
    content,
    ddp_split,
    dynamic_state,
    entry,
    guards,
    process_state,
    read_set,
    tags,
    verify,
)
from aotcache.storage import opened, private_files

log = logging.getLogger("aotcache")

_state = threading.local()
_installed = False
unavailable: str | None = None  # why the hooks could not be installed (the frame cache is then off), once tried
_install_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()


class _Refused(Exception):
    """The frame cannot be frame-cached; `code` is the counted reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass
class _Frame:
    code: types.CodeType
    f_globals: dict[str, Any]
    f_locals: dict[str, Any]
    closure: tuple | None
    cfg: settings.Settings
    tiers: Any  # storage.tiered.TieredStore
    key: _core.CacheKey


@dataclasses.dataclass
class _Recording:
    frame: _Frame
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
    refused: _Refused | None = None

    def refuse(self, code: str, message: str) -> None:
        if self.refused is None:
            self.refused = _Refused(code, message)


# A test hook (test_frames.py, the zoo and adversarial suites): a JSON line per guard set built, fresh ("traced") or
# from a frame entry ("loaded"), with the code digest and the sorted (source, guard kind) pairs, a content guard
# under the kind it replaced. Comparing both for the same code shows the loaded guards are a fresh trace's.
GUARD_LOG = os.environ.get("AOTCACHE_FRAMES_GUARD_LOG", "")


def _log_guards(how: str, code: types.CodeType, guard_set: Any) -> None:
    try:
        pairs = set()
        for g in guard_set:
            fn = g.create_fn
            if isinstance(fn, functools.partial) and fn.func in (
                guards.aotcache_storage_partition,
                guards.aotcache_meshes,
            ):
                continue  # ours, beyond Dynamo's: a fresh trace has none
            if isinstance(fn, functools.partial) and fn.func is guards.aotcache_content_match:
                kind = fn.args[0]
            elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_length_match:
                kind = "EMPTY_NN_MODULE_HOOKS_DICT"
            elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_empty_hooks:
                pairs.update((g.originating_source.name + "." + m, "EMPTY_NN_MODULE_HOOKS_DICT") for m in fn.args[0])
                continue
            else:
                kind = g.create_fn_name()
            pairs.add((g.name, kind))
        line = {"how": how, "code": content.code_digest(code), "name": code.co_qualname, "guards": sorted(pairs)}
        line["pid"] = os.getpid()
        with private_files.open_append(GUARD_LOG) as f:
            f.write(json.dumps(line) + "\n")
    except Exception:
        log.debug("cannot log the guards of %s", code.co_qualname, exc_info=True)


# ---- installation ---------------------------------------------------------------------------------------------------
def install() -> None:
    """Wraps the Dynamo internals above, once per process; where this torch lacks one, none (frames stay off)."""
    global _installed, unavailable
    with _install_lock:
        if _installed:
            return
        found = torch_internals.resolve("frame_cache")  # every internal checked before any is replaced
        if found is None:
            unavailable = torch_internals.unavailable("frame_cache")
            _installed = True  # once: the frame cache stays off in this process, the graph cache works as always
            return
        convert_frame, dynamo_guards = found["convert_frame"], found["dynamo_guards"]
        dynamo_output_graph, dynamo_nn_module = found["dynamo_output_graph"], found["dynamo_nn_module"]
        dynamo_functions = found["dynamo_functions"]
        original_compile, signature = found["compile"], found["compile_signature"]
        original_cfm, original_serialize = found["check_function_manager"], found["serialize_guards"]
        original_reduce, original_constant = found["reducer_override"], found["invoke_and_store_as_constant"]

        def _compile(*args: Any, **kwargs: Any) -> Any:
            return _compile_frame(original_compile, signature, args, kwargs)

        class RecordingCheckFunctionManager(original_cfm):  # type: ignore[misc, valid-type]
            def __init__(self, f_code: Any, output_graph: Any = None, *args: Any, **kwargs: Any) -> None:
                if GUARD_LOG and output_graph is not None:
                    _log_guards("traced", f_code, getattr(output_graph, "guards", ()))
                rec = _recording()
                if rec is None or f_code is not rec.frame.code:
                    super().__init__(f_code, output_graph, *args, **kwargs)
                    return
                kwargs["save_guards"] = True
                kwargs["strict_error"] = False
                rec.output_graph_live = output_graph
                super().__init__(f_code, output_graph, *args, **kwargs)
                rec.guards_state = self.guards_state
                rec.output_graph = output_graph

        def serialize_guards(self: Any, builder: Any, sorted_guards: Any, output_graph: Any) -> bytes:
            rec = _recording()
            if rec is None:
                return original_serialize(self, builder, sorted_guards, output_graph)
            try:
                with warnings.catch_warnings():  # what our reading of the trace's objects sets off is not the user's
                    warnings.simplefilter("ignore")
                    return _serialize_recorded(rec, original_serialize, self, builder, sorted_guards, output_graph)
            except Exception as e:  # Dynamo catches PackageError only: the frame traces, unrecorded
                rec.refuse(getattr(e, "code", "guards"), f"{type(e).__name__}: {e}")
                raise torch._dynamo.exc.PackageError(str(e)) from None

        def reducer_override(self: Any, obj: Any) -> Any:
            if _recording() is None:
                return original_reduce(self, obj)
            guards.keep_named_constant(self, obj)
            reduced = guards.reduce_wrapped_function(obj)
            if reduced is not None:
                return reduced
            return guards.drop_unguarded_grad(self, guards.reduce_fsdp_module(obj, original_reduce(self, obj)))

        original_fold_call = found["torch_function_call"]

        def torch_function_call(self: Any, tx: Any, args: Any, kwargs: Any) -> Any:
            rec = _recording()
            if rec is not None:
                try:
                    process_state.record_call(rec.queries, self.value, list(args), dict(kwargs))
                except process_state.Unrecordable as e:
                    rec.refuse("process_query_argument", f"{process_state.query_name(self.value)}: {e}")
                except Exception as e:  # a value we cannot read: the frame is not recorded
                    rec.refuse("process_query", f"{type(e).__name__}: {e}")
            return original_fold_call(self, tx, args, kwargs)

        def invoke_and_store_as_constant(tx: Any, fn: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            rec = _recording()
            if rec is not None:
                # The result is baked into the graph and no guard checks it: another process's call may differ.
                rec.refuse("assume_constant_result", f"{getattr(fn, '__qualname__', fn)} is assume_constant_result")
            return original_constant(tx, fn, name, *args, **kwargs)

        tracer_output = getattr(dynamo_output_graph, "DynamoTracerOutput", None)
        original_cleanup = getattr(tracer_output, "_cleanup_output_graph", None)

        def _cleanup_output_graph(self: Any) -> Any:
            # Called on the output of each attempt Dynamo abandons (RestartAnalysis), before it frees the graph.
            rec = _recording()
            failed = getattr(self, "output_graph_for_cleanup", None)
            if rec is not None and failed is not None and getattr(self, "f_globals", None) is rec.frame.f_globals:
                rec.rolled_back.append(list(failed.guards))
            return original_cleanup(self)

        torch_function_call._aotcache_replaces = original_fold_call  # type: ignore[attr-defined]
        found["torch_function_class"].call_function = torch_function_call
        dynamo_functions.invoke_and_store_as_constant = invoke_and_store_as_constant
        if getattr(dynamo_nn_module, "invoke_and_store_as_constant", None) is original_constant:
            dynamo_nn_module.invoke_and_store_as_constant = invoke_and_store_as_constant
        convert_frame._compile = _compile
        dynamo_guards.GuardsStatePickler.reducer_override = reducer_override
        convert_frame.CheckFunctionManager = RecordingCheckFunctionManager
        dynamo_guards.CheckFunctionManager.serialize_guards = serialize_guards
        if original_cleanup is not None:  # else every frame traced after a restart is refused (_serialize_recorded)
            _cleanup_output_graph._aotcache_replaces = original_cleanup  # type: ignore[attr-defined]
            tracer_output._cleanup_output_graph = _cleanup_output_graph
        _installed = True


def _serialize_recorded(
    rec: _Recording, original_serialize: Any, manager: Any, builder: Any, sorted_guards: Any, output_graph: Any
) -> bytes:
    """Dynamo's serialization of a recorded frame's guards, after: the process-wide facts and the read set recorded
    (read_set.py), identity guards made content guards, one user frame kept per guard, the storage-partition guard
    added, dimension markings taken. Raises _Refused or content.Unportable when the frame cannot be carried."""
    rec.facts = read_set.facts()
    if rec.facts["global_module_hooks"]:
        raise _Refused("global_hooks", "global nn.Module hooks are registered: the trace inlined them")
    live = rec.output_graph_live or output_graph
    rec.facts.update(process_state.facts(rec.queries, live))
    rec.traced = read_set.traced_names(live.tracing_context.traced_code)
    # The sets and dicts the trace iterated: their order is what the program saw (read_set.ORDER_KIND).
    iterated = getattr(live, "guard_on_key_order", ())
    rec.reads = read_set.record(builder, sorted_guards, rec.traced, iterated=iterated)
    rec.guard_names = {g.name for g in sorted_guards if g.name}
    context = torch._guards.CompileContext.try_get()
    attempts = getattr(context, "attempt", 0) or 0
    if attempts > len(rec.rolled_back):
        raise _Refused("rolled_back_unseen", f"{attempts} tracing attempts rolled back, {len(rec.rolled_back)} seen")
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


def _recording() -> _Recording | None:
    stack = getattr(_state, "recordings", None)
    return stack[-1] if stack else None


# ---- the wrapped compile of one frame --------------------------------------------------------------------------------
def _compile_frame(original: Any, signature: inspect.Signature, args: tuple, kwargs: dict) -> Any:
    try:
        bound = signature.bind(*args, **kwargs)
        frame = _frame_of(bound.arguments)
    except Exception as e:
        _internal_error("key", e, None)
        frame = None
    if frame is None:
        return original(*args, **kwargs)
    try:
        with warnings.catch_warnings():  # what reading this process's objects sets off is not the user's warning
            warnings.simplefilter("ignore")
            loaded = _load(frame, bound.arguments.get("compile_id"))
    except Exception as e:
        _internal_error("load", e, frame)
        loaded = None
    if loaded is not None and not frame.cfg.verify_frames:
        return loaded[0]
    rec = _Recording(frame)
    stack = getattr(_state, "recordings", None)
    if stack is None:
        stack = _state.recordings = []
    stack.append(rec)
    t0, graphs_t0 = time.perf_counter(), tags.backend_seconds()
    try:
        result = original(*args, **kwargs)
    finally:
        stack.pop()
    # The frame's own compile time: Dynamo's trace, its graphs' compiles left out (their entries carry their own).
    frame_seconds = time.perf_counter() - t0 - (tags.backend_seconds() - graphs_t0)
    if loaded is not None:
        _verify(rec, result, loaded[1])
        return result
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _record(rec, result, max(frame_seconds, 0.0))
    except _Refused as r:
        _count({"frames.bypasses": 1, f"frames.bypass.{r.code}": 1}, frame)
        log.info("frame bypass reason=%s %s: %s", r.code, _name(frame.code), r)
    except Exception as e:
        _internal_error("record", e, frame)
    return result


def _backend_options(compiler_fn: Any, ddp: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The Inductor options of an aotcache compile (None when `compiler_fn` is not the aotcache backend): the
    backend sits under Dynamo's wrappers (_TorchCompileWrapper holds mode and options), and under the DDP optimizer
    for a frame of a DistributedDataParallel module (its split layout is then put into `ddp`)."""
    mode, options = None, None
    fn = compiler_fn
    for _ in range(8):
        routed = default_backend.routed_options(fn)  # torch.compile's default backend, routed by aotcache.enable()
        if routed is not None:
            return compiler.inductor_options(None, routed)
        optimizer = ddp_split.optimizer_of(fn)
        if optimizer is not None:
            if ddp is not None:
                ddp.update(ddp_split.layout(optimizer))
            fn = optimizer.backend_compile_fn
            continue
        if (
            getattr(fn, "__module__", None) == "aotcache.backend"
            and getattr(fn, "__name__", None) == "aotcache_backend"
        ):
            return compiler.inductor_options(mode, options)
        if isinstance(fn, torch._TorchCompileWrapper):
            mode, options = fn.kwargs.get("mode"), fn.kwargs.get("options")
            fn = fn.compiler_fn
            continue
        inner = getattr(fn, "_torchdynamo_orig_backend", None) or getattr(fn, "compiler_fn", None)
        if inner is None or inner is fn:
            return None
        fn = inner
    return None


def _frame_of(arguments: dict[str, Any]) -> _Frame | None:
    """The frame to look up, or None when it is not frame-cached (frames off, another backend, export)."""
    cfg = settings.current()
    if not cfg.frames or not cfg.enabled or arguments.get("export"):
        return None
    ddp: dict[str, Any] = {}
    options = _backend_options(arguments.get("compiler_fn"), ddp)
    if options is None:
        return None
    tiers = opened.tiers(cfg)
    if tiers is None:
        return None
    code, f_globals = arguments["code"], arguments["globals"]
    module = f_globals.get("__name__")
    import sys

    if not isinstance(module, str) or getattr(sys.modules.get(module), "__dict__", None) is not f_globals:
        _count({"frames.bypasses": 1, "frames.bypass.no_module": 1}, None, tiers.local)
        return None
    try:
        config = global_state.config_state(options)
    except Bypass as b:
        _count({"frames.bypasses": 1, f"frames.bypass.{b.code}": 1}, None, tiers.local)
        return None
    config["frame"] = global_state.frame_config()
    config["frame"]["one_graph"] = bool(arguments.get("one_graph"))
    config["frame"]["closure"] = content.closure_kinds(arguments.get("closure"))
    if ddp:  # split by the DDP optimizer: what decides the pieces (the graph decides the rest)
        config["frame"]["ddp"] = ddp
    with isa_probe.remembered(cfg.cache_dir, cfg.isa_probe_memo) as probe:
        environment = global_state.environment()
    if probe.counters():
        counters.record(probe.counters(), tiers.local)
    key = _core.compute_frame_key(
        content.code_digest(code),
        f"{module}.{code.co_qualname}",
        config,
        environment,
        global_state.user_state(cfg.salt),
    )
    return _Frame(code, f_globals, arguments["locals"], arguments.get("closure"), cfg, tiers, key)


# ---- load -----------------------------------------------------------------------------------------------------------
def _read(frame: _Frame, key_hex: str) -> Any:
    read = frame.tiers.get(key_hex)
    if read.entry is None and read.writable:
        return frame.tiers.fetch(key_hex)
    return read.entry


def _load(frame: _Frame, compile_id: Any) -> Any:
    t0 = time.perf_counter()
    found = _read(frame, frame.key.hex)
    if found is None:
        _count({"frames.misses": 1, "frames.miss.no_entry": 1}, frame)
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
            _count({"frames.hits": 1, "frames.graphs": graphs}, frame, defer=True)
            log.info(
                "frame hit %s key=%s load=%.1fms",
                _name(frame.code),
                frame.key.hex[:16],
                1e3 * (time.perf_counter() - t0),
            )
            return result, candidate
        reasons.append(reason)
    _count({"frames.misses": 1, **{f"frames.miss.{r}": 1 for r in set(reasons)}}, frame)
    log.info("frame miss %s key=%s: %s", _name(frame.code), frame.key.hex[:16], ", ".join(reasons))
    return None


# The guard managers this process built for the candidates of each code object, by the candidate's serialized guards.
# Dynamo calls the compile of a frame only when every guard manager it holds for the code failed on the call: a
# candidate served earlier in the process (its manager among those) and one whose guards failed earlier would
# otherwise be unpickled and built again only to fail again (gpt2:generate's decode steps: 0.05 s each). Checking
# the manager built then decides it, as Dynamo's cache entries are checked. One that holds goes the full way.
_built: weakref.WeakKeyDictionary[types.CodeType, dict[str, Any]] = weakref.WeakKeyDictionary()


def _remember_built(frame: _Frame, guards_text: str, manager: Any) -> None:
    _built.setdefault(frame.code, {})[guards_text] = manager


def _fails_again(frame: _Frame, candidate: dict[str, Any]) -> bool:
    """Whether the guard manager built earlier in this process for this candidate fails on this call."""
    manager = _built.get(frame.code, {}).get(candidate["guards"])
    if manager is None:
        return False
    try:
        return not manager.check(frame.f_locals)
    except Exception:  # a manager that cannot say: build the candidate's guards again
        return False


def _try_candidate(frame: _Frame, candidate: dict[str, Any], compile_id: Any) -> tuple[Any, str]:
    from torch._dynamo.output_graph import get_builtins_dict
    from torch._dynamo.package import load_guard_manager, load_guards_state
    from torch._dynamo.types import GuardedCode, wrap_guarded_code
    from torch._subclasses.fake_tensor import FakeTensorMode

    if _fails_again(frame, candidate):
        _count({"frames.known_failing": 1}, frame)
        return None, "guards_failed"
    if not content.sources_unchanged(candidate["sources"]):
        return None, "sources_changed"
    changed_fact = read_set.facts_changed(candidate["facts"]) or process_state.facts_changed(candidate["facts"])
    if changed_fact is not None:
        log.debug("frame %s not served: %s", _name(frame.code), changed_fact)
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
            from torch._dynamo.output_graph import get_builtins_dict

            extra[name] = get_builtins_dict(scope)
    view = {**scope, **extra} if extra else scope
    changed_read = read_set.changed(
        candidate["reads"], frame.f_locals, view, candidate.get("traced")
    ) or read_set.rolled_back_changed(candidate["rolled_back_reads"], frame.f_locals, view)
    if changed_read is not None:
        log.debug("frame %s not served: %s", _name(frame.code), changed_read)
        return None, "reads_changed"
    # Some sources install a guard when they are built (ImportSource: ID_MATCH on the module), unpickling too: give
    # them a scratch tracing context. The guard they meant is in the serialized list already, as a content guard.
    with torch._guards.tracing(torch._guards.TracingContext(FakeTensorMode())):
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
        _remember_built(frame, candidate["guards"], guard_manager)
        failed = None if guard_manager.check(frame.f_locals) else "check"
    except Exception as e:
        failed = f"{type(e).__name__}: {e}"
    if GUARD_LOG:
        _log_guards("loaded", frame.code, guards_state.output_graph._guards)
    if added_builtins:
        # Kept installed (as Dynamo keeps its own): the guard manager remembered for this candidate reads it.
        _reserve_unique_id(builtins_name)
    if failed is not None:
        if log.isEnabledFor(logging.DEBUG):
            why = guard_manager.check_verbose(frame.f_locals) if failed == "check" else failed
            log.debug("frame %s guards failed: %s", _name(frame.code), why)
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
        _count(delta, frame, defer=True)
    automatic_dynamic = dynamic_state.decode(candidate.get("automatic_dynamic", {}))
    scope.update(values)
    code = _load_code(candidate["code"])
    # What Dynamo records of each code it makes: the original (recompilation reasons read it) and that it is
    # generated (a frame of it is never converted again).
    from torch._dynamo import convert_frame
    from torch._dynamo.utils import orig_code_map

    orig_code_map[code] = frame.code
    convert_frame.output_codes.add(code)
    dynamic_state.merge(frame.code, frame.closure, automatic_dynamic)
    return wrap_guarded_code(GuardedCode(code, guard_manager, compile_id, "Torch-Compiled Region: aotcache frame")), ""


def _trace_served(frame: _Frame) -> None:
    """A structured-trace event for the frame about to be served (tlparse shows it under TORCH_TRACE), sent before
    its guard manager is built. Torch keeps a lazy trace handler until a process's first event, which then decides
    whether tracing is on (off: the handler removes itself); while it is there, every event's payload is made. A
    served frame's first event would otherwise be Dynamo's text of the whole guard tree (`dynamo_cpp_guards_str`,
    65 ms for GPT-2 124M's frame), made for nothing when no trace is written."""
    try:
        torch._logging.trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": "aotcache_frame_served", "encoding": "string"},
            payload_fn=lambda: _name(frame.code),
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
    return torch._dynamo.disable(make, reason="aotcache's resume function factory")


@functools.cache
def _skip_code(code: types.CodeType) -> bool:
    try:
        from torch._dynamo.eval_frame import skip_code

        skip_code(code)
        return True
    except Exception:
        return False


def _reserve_unique_id(name: str) -> None:
    """Dynamo names the globals it installs `<prefix>_<n>` from one process-wide counter and refuses a name that
    exists: after installing a recorded `..._<n>`, move the counter past n so Dynamo never makes that name again."""
    from torch._dynamo import bytecode_transformation

    number = name.rsplit("_", 1)[-1]
    if number.isdigit():
        current = next(bytecode_transformation._unique_id_counter)
        bytecode_transformation._unique_id_counter = itertools.count(max(current, int(number) + 1))


def _load_graph(frame: _Frame, spec: dict[str, Any], loaded: list[dict[str, int]]) -> Any:
    """The callable of one graph entry a frame references (None when it is gone); its counters (a hit) are appended
    to `loaded`."""
    found = _read(frame, spec["key"])
    if found is None:
        return None
    if spec.get("index"):  # its guard index stays as fresh as the candidate, or eviction takes it first
        frame.tiers.local.mark_used(spec["index"])
    t0 = time.perf_counter()
    metadata = found.metadata if isinstance(found.metadata, dict) else {}
    with kernels.installed(found.kernels, frame.cfg.kernels) as delta:
        fn = compiler.load_serialized(found.payload, metadata, frame.cfg.light_load)
    # The graph is served from the cache: a hit, as if Dynamo had traced it and the backend had found it.
    saved_us = int(1e6 * float(metadata.get("compile_seconds", 0.0)))
    load_us = int(1e6 * (time.perf_counter() - t0))
    loaded.append({**delta, "hits": 1, "bytes_read": len(found.payload), "load_us": load_us, "saved_us": saved_us})
    if spec["single"]:
        inner = fn

        def fn(*args: Any) -> Any:
            return inner(*args)[0]

    return fn


def _global_value(frame: _Frame, spec: dict[str, Any], loaded: list[dict[str, int]]) -> Any:
    """The value of one global the frame's bytecode reads; a graph's counters (a hit) are appended to `loaded`."""
    kind = spec["kind"]
    if kind == "graph":
        fn = _load_graph(frame, spec, loaded)
        return None if fn is None else torch._dynamo.disable(fn, reason="do not trace Dynamo-compiled graph")
    if kind == "split":
        pieces = {}
        for target, piece in spec["pieces"].items():
            pieces[target] = _load_graph(frame, piece, loaded)
            if pieces[target] is None:
                return None
        return torch._dynamo.disable(ddp_split.build(spec, pieces), reason="do not trace Dynamo-compiled graph")
    if kind == "function":
        code = _load_code(spec["code"])
        if spec.get("factory"):
            return _resume_factory(code, frame.f_globals, spec["name"])
        return types.FunctionType(code, frame.f_globals, spec["name"])
    if kind == "module":
        return importlib.import_module(spec["name"])
    if kind == "builtins":
        from torch._dynamo.output_graph import get_builtins_dict

        return get_builtins_dict(frame.f_globals)
    raise ValueError(f"unknown global kind {kind!r}")


# ---- record ---------------------------------------------------------------------------------------------------------
def _verify(rec: _Recording, result: Any, served: dict[str, Any]) -> None:
    """Verify mode: `served` (the candidate the cache had for this call) against Dynamo's own trace of it (`rec`,
    `result`), counted and logged; Dynamo's result runs either way."""
    frame = rec.frame
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh, _ = _candidate(rec, result, comparing=True)
            differences = verify.differences(served, fresh)
    except _Refused as r:
        differences = [f"Dynamo's trace is not a frame entry ({r.code}: {r})"]
    except Exception as e:
        _internal_error("verify", e, frame)
        return
    if differences:
        _count({"frames.verify.mismatch": 1}, frame)
        log.warning(
            "frame verify mismatch %s key=%s: the served entry differs from Dynamo's trace: %s",
            _name(frame.code),
            frame.key.hex[:16],
            "; ".join(differences),
        )
    else:
        _count({"frames.verify.match": 1}, frame)


def _record(rec: _Recording, result: Any, seconds: float) -> None:
    candidate, manager = _candidate(rec, result)
    _remember_built(rec.frame, candidate["guards"], manager)  # a later compile of the code checks it first
    _persist(rec.frame, candidate, seconds)


# What the recorder refuses out of caution rather than because the trace cannot be described: the trace may have
# read something no guard covers (an environment variable, an assume_constant_result value), perhaps only in an
# inlining attempt Dynamo rolled back. The verifier still builds such a trace's candidate: whatever the trace baked in
# shows in its code, guards or graph keys, which it compares with the served entry's.
_CAUTIOUS = frozenset({"assume_constant_result", "environ"})


def _candidate(rec: _Recording, result: Any, comparing: bool = False) -> tuple[dict[str, Any], Any]:
    """The frame entry candidate of a trace, and the guard manager rebuilt from it. Raises _Refused. `comparing`
    (the verifier) builds it despite the cautious refusals."""
    frame = rec.frame
    guarded = getattr(result, "guarded_code", None)
    if guarded is None:  # Dynamo skipped the frame (no graph, or it runs the frame as it is): nothing to replay
        raise _Refused("no_code", "Dynamo made no code for the frame")
    if rec.refused is not None and not (comparing and rec.refused.code in _CAUTIOUS):
        raise rec.refused
    if rec.guards_state is None or rec.output_graph is None:
        raise _Refused("guards", "Dynamo did not serialize the frame's guards")
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
            raise _Refused("environ", f"the trace read the environment ({code.co_qualname})")
        if content.code_digest(code) == frame_digest or code.co_name.startswith("torch_dynamo_resume_in_"):
            continue
        try:
            sources.add(content.source_of(code))
        except content.Unportable as e:
            raise _Refused("inlined_source", str(e)) from None
    manager = _check_loadable(frame, rec.guards_state, rec.markings)
    unstable = read_set.changed(rec.reads, frame.f_locals, frame.f_globals, rec.traced) or read_set.rolled_back_changed(
        rec.rolled_back_reads, frame.f_locals, frame.f_globals
    )
    if unstable is not None:  # a content that differs from itself would never let the frame load
        raise _Refused("reads_unstable", f"the read set does not hold for the call traced: {unstable}")
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


def _check_loadable(frame: _Frame, guards_state: bytes, markings: dict[str, Any]) -> Any:
    """Rebuilds the guards from their serialized form, as a load would, and checks them on the call just traced
    (the manager is returned):
    Dynamo serializes some values it cannot pickle as placeholders (torch's _Missing), and guards built on them
    fail; a guard rebuilt from a serialized value that lost something the guard reads (a tensor's dimension
    markings, say) would reject the very call it was traced for. Such a frame is not recorded."""
    from torch._dynamo.package import load_guard_manager, load_guards_state
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with torch._guards.tracing(torch._guards.TracingContext(FakeTensorMode())):
            state = load_guards_state(guards_state)
        guards.restore_markings(state, markings)
        manager = load_guard_manager(state, frame.code, frame.f_globals)
    except Exception as e:
        raise _Refused("guards_unloadable", f"its serialized guards do not rebuild: {type(e).__name__}: {e}") from None
    if not manager.check(frame.f_locals):
        failed = manager.check_verbose(frame.f_locals).verbose_code_parts
        raise _Refused("guards_reject_call", f"its rebuilt guards reject the call traced: {failed}")
    return manager


def _describe_global(name: str, value: Any, builtins_name: str | None) -> dict[str, Any]:
    if name == builtins_name:
        return {"kind": "builtins"}
    if isinstance(value, types.ModuleType):
        import sys

        if sys.modules.get(value.__name__) is value:
            return {"kind": "module", "name": value.__name__}
    from torch._dynamo.eval_frame import innermost_fn

    tagged = tags.lookup(innermost_fn(value)) if callable(value) else None
    if tagged is not None:
        return {"kind": "graph", **tagged}
    split = ddp_split.split_module(value)
    if split is not None:
        try:
            return {"kind": "split", **ddp_split.describe(split, lambda fn: tags.lookup(innermost_fn(fn)))}
        except ddp_split.Unsupported as e:
            raise _Refused("ddp_split", f"the DDP optimizer's split of {name}: {e}") from None
    if isinstance(value, types.FunctionType) and value.__code__.co_name.startswith("torch_dynamo_resume_in_"):
        return {"kind": "function", "name": value.__name__, "code_object": value.__code__}
    if isinstance(value, types.FunctionType) and value.__qualname__.endswith(
        "install_resume_function_global.<locals>._make_fn"
    ):
        # The resume function of a frame with free variables: Dynamo installs a factory taking the closure.
        cells = dict(zip(value.__code__.co_freevars, value.__closure__ or ()))
        code = cells["code"].cell_contents if "code" in cells else None
        if not isinstance(code, types.CodeType) or not code.co_name.startswith("torch_dynamo_resume_in_"):
            raise _Refused("global", f"resume factory {name} has an unexpected shape")
        return {"kind": "function", "name": name, "code_object": code, "factory": True}
    if callable(value) and name.startswith("__compiled_fn"):
        raise _Refused("graph_not_cached", f"graph {name} has no cache entry (bypassed or bound to lifted state)")
    raise _Refused("global", f"Dynamo installed {name}, a {type(value).__qualname__} a frame entry cannot carry")


def _dump_code(code: types.CodeType) -> dict[str, Any]:
    try:
        data, constants = code_codec.dump(code)
    except content.Unportable as e:
        raise _Refused("constant", str(e)) from None
    return {"marshal": entry.b64(data), "constants": constants}


def _load_code(spec: dict[str, Any]) -> types.CodeType:
    return code_codec.load(entry.unb64(spec["marshal"]), spec["constants"])


def _renamed(code: types.CodeType, renames: dict[str, str]) -> types.CodeType:
    consts = tuple(_renamed(c, renames) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_names=tuple(renames.get(n, n) for n in code.co_names), co_consts=consts)


def _persist(frame: _Frame, candidate: dict[str, Any], seconds: float) -> None:
    # Read, add and write under the key's lock: ranks of one job record different candidates of one frame at once
    # (one per tensor-parallel group: their meshes differ), and a plain read-modify-write keeps only the last one.
    with single_flight.exclusive(frame.tiers.local, frame.key.hex):
        found = frame.tiers.get(frame.key.hex)
        known: list[dict[str, Any]] = []
        if found.entry is not None:
            try:
                known = entry.decode(found.entry.payload)
            except ValueError:
                known = []
        elif not found.writable:
            raise _Refused("not_writable", "the frame's key holds an entry this process may not replace")
        # A candidate with the same code, globals and sources is replaced (its guards failed, or they are Dynamo's
        # guards for other sizes of the same graphs): the newest serves, the entry does not fill up with twins.
        same = ("code", "globals", "sources")
        known = [c for c in known if any(c.get(k) != candidate[k] for k in same)]
        known.append(candidate)
        metadata = {"created_unix": int(time.time()), "payload_kind": entry.KIND, "compile_seconds": float(seconds)}
        frame.tiers.put(frame.key, entry.encode(known), metadata, b"", b"")
    _count({"frames.recorded": 1}, frame)
    log.info("frame recorded %s key=%s candidates=%d", _name(frame.code), frame.key.hex[:16], len(known))


# ---- counting -------------------------------------------------------------------------------------------------------
def _name(code: types.CodeType) -> str:
    return code.co_qualname


def _count(delta: dict[str, int], frame: _Frame | None, store: Any = None, defer: bool = False) -> None:
    """Counts `delta` in the process and the frame's directory; `defer` for a served frame's counts (a warm start
    serves many frames: the directory's counters file is written once for them, counters.flush)."""
    try:
        local = store if store is not None else (frame.tiers.local if frame is not None else None)
        counters.record(delta, local, defer=defer)
    except Exception:
        log.debug("cannot count %s", delta, exc_info=True)


def _internal_error(phase: str, error: BaseException, frame: _Frame | None) -> None:
    _count({"frames.internal_errors": 1, f"frames.internal_error.{phase}": 1}, frame)
    kind = (phase, type(error).__name__)
    if kind not in _warned:
        _warned.add(kind)
        log.warning("frame cache %s failed, Dynamo traces the frame: %r", phase, error, exc_info=True)
