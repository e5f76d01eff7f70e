"""The frame cache's hooks into Dynamo (torch 2.13-2.15), and the compile of one frame they run: its key
(frame_key.py), the load of its entry (serve.py), else Dynamo's trace recorded (record.py).

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

The internals are looked up, and checked for the shape the hooks need, before any is replaced (`torch_glue`,
feature `frame_cache`): on a torch that fails the check, none is installed, the frame cache is off for the process
with one WARNING naming what failed (`unavailable`), and the graph cache works as always
(tests/python/torch_glue/test_torch_internals.py removes or changes each in turn).

Every failure of ours is a fallback to Dynamo's own path, counted `frames.internal_error.<phase>`; counters
`frames.hits`, `frames.misses`, `frames.recorded`, `frames.bypass.<reason>`.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import warnings
from typing import Any

from aotcache import torch_glue
from aotcache.frames import (
    counting,
    frame_key,
    guard_log,
    guards,
    process_state,
    record,
    serve,
)
from aotcache.pipeline import tags
from aotcache.torch_glue import dynamo as dynamo_glue
from aotcache.torch_glue.patching import Patches

log = logging.getLogger("aotcache")

_installed = False
unavailable: str | None = None  # why the hooks could not be installed (the frame cache is then off), once tried
_install_lock = threading.Lock()


def install() -> None:
    """Wraps the Dynamo internals above, once per process; where this torch lacks one, none (frames stay off)."""
    global _installed, unavailable
    with _install_lock:
        if _installed:
            return
        found = torch_glue.resolve("frame_cache")  # every internal checked before any is replaced
        if found is None:
            unavailable = torch_glue.unavailable("frame_cache")
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
                if guard_log.GUARD_LOG and output_graph is not None:
                    guard_log.log_guards("traced", f_code, getattr(output_graph, "guards", ()))
                rec = record.current()
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
            rec = record.current()
            if rec is None:
                return original_serialize(self, builder, sorted_guards, output_graph)
            try:
                with warnings.catch_warnings():  # what our reading of the trace's objects sets off is not the user's
                    warnings.simplefilter("ignore")
                    return record.serialize_recorded(
                        rec, original_serialize, self, builder, sorted_guards, output_graph
                    )
            except Exception as e:  # Dynamo catches PackageError only: the frame traces, unrecorded
                rec.refuse(getattr(e, "code", "guards"), f"{type(e).__name__}: {e}")
                raise dynamo_glue.PackageError(str(e)) from None

        def reducer_override(self: Any, obj: Any) -> Any:
            if record.current() is None:
                return original_reduce(self, obj)
            guards.keep_named_constant(self, obj)
            reduced = guards.reduce_wrapped_function(obj)
            if reduced is not None:
                return reduced
            return guards.drop_unguarded_grad(self, guards.reduce_fsdp_module(obj, original_reduce(self, obj)))

        original_fold_call = found["torch_function_call"]

        def torch_function_call(self: Any, tx: Any, args: Any, kwargs: Any) -> Any:
            rec = record.current()
            if rec is not None:
                try:
                    process_state.record_call(rec.queries, self.value, list(args), dict(kwargs))
                except process_state.Unrecordable as e:
                    rec.refuse("process_query_argument", f"{process_state.query_name(self.value)}: {e}")
                except Exception as e:  # a value we cannot read: the frame is not recorded
                    rec.refuse("process_query", f"{type(e).__name__}: {e}")
            return original_fold_call(self, tx, args, kwargs)

        def invoke_and_store_as_constant(tx: Any, fn: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            rec = record.current()
            if rec is not None:
                # The result is baked into the graph and no guard checks it: another process's call may differ.
                rec.refuse("assume_constant_result", f"{getattr(fn, '__qualname__', fn)} is assume_constant_result")
            return original_constant(tx, fn, name, *args, **kwargs)

        tracer_output = getattr(dynamo_output_graph, "DynamoTracerOutput", None)
        original_cleanup = getattr(tracer_output, "_cleanup_output_graph", None)

        def _cleanup_output_graph(self: Any) -> Any:
            # Called on the output of each attempt Dynamo abandons (RestartAnalysis), before it frees the graph.
            rec = record.current()
            failed = getattr(self, "output_graph_for_cleanup", None)
            if rec is not None and failed is not None and getattr(self, "f_globals", None) is rec.frame.f_globals:
                rec.rolled_back.append(list(failed.guards))
            return original_cleanup(self)

        torch_function_call._aotcache_replaces = original_fold_call  # type: ignore[attr-defined]
        patches = (
            Patches("the frame cache")
            .replace(found["torch_function_class"], "call_function", torch_function_call)
            .replace(dynamo_functions, "invoke_and_store_as_constant", invoke_and_store_as_constant)
        )
        if getattr(dynamo_nn_module, "invoke_and_store_as_constant", None) is original_constant:
            patches.replace(dynamo_nn_module, "invoke_and_store_as_constant", invoke_and_store_as_constant)
        patches.replace(convert_frame, "_compile", _compile)
        patches.replace(dynamo_guards.GuardsStatePickler, "reducer_override", reducer_override)
        patches.replace(convert_frame, "CheckFunctionManager", RecordingCheckFunctionManager)
        patches.replace(dynamo_guards.CheckFunctionManager, "serialize_guards", serialize_guards)
        if original_cleanup is not None:  # else a frame traced after a restart is refused (record.serialize_recorded)
            _cleanup_output_graph._aotcache_replaces = original_cleanup  # type: ignore[attr-defined]
            patches.replace(tracer_output, "_cleanup_output_graph", _cleanup_output_graph)
        if not patches.install():  # none of them stays (one WARNING): the frame cache is off, graphs are cached
            unavailable = "its hooks could not be installed into Dynamo"
        _installed = True


def _compile_frame(original: Any, signature: inspect.Signature, args: tuple, kwargs: dict) -> Any:
    try:
        bound = signature.bind(*args, **kwargs)
        frame = frame_key.frame_of(bound.arguments)
    except Exception as e:
        counting.internal_error("key", e, None)
        frame = None
    if frame is None:
        return original(*args, **kwargs)
    try:
        with warnings.catch_warnings():  # what reading this process's objects sets off is not the user's warning
            warnings.simplefilter("ignore")
            loaded = serve.load(frame, bound.arguments.get("compile_id"))
    except Exception as e:
        counting.internal_error("load", e, frame)
        loaded = None
    if loaded is not None and not frame.cfg.verify_frames:
        return loaded[0]
    rec = record.Recording(frame)
    stack = getattr(record._state, "recordings", None)
    if stack is None:
        stack = record._state.recordings = []
    stack.append(rec)
    t0, graphs_t0 = time.perf_counter(), tags.backend_seconds()
    try:
        result = original(*args, **kwargs)
    finally:
        stack.pop()
    # The frame's own compile time: Dynamo's trace, its graphs' compiles left out (their entries carry their own).
    frame_seconds = time.perf_counter() - t0 - (tags.backend_seconds() - graphs_t0)
    if loaded is not None:
        record.verify_served(rec, result, loaded[1])
        return result
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record.record(rec, result, max(frame_seconds, 0.0))
    except record.Refused as r:
        counting.count({"frames.bypasses": 1, f"frames.bypass.{r.code}": 1}, frame)
        log.info("frame bypass reason=%s %s: %s", r.code, counting.frame_name(frame.code), r)
    except Exception as e:
        counting.internal_error("record", e, frame)
    return result
