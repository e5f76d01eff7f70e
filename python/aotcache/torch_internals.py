"""Every torch internal aotcache reaches into, in one place: per feature, what it uses, checked by behaviour on
first use.

A feature here is a piece of aotcache that needs private torch code: a hook installed into it, or a private function
patched while aotcache compiles. Its probe runs once per process, the first time the feature is asked for
(`resolve(name)`): it looks every internal up and checks that it still does what the feature relies on (a redirected
cache directory is where torch writes, a checkpoint policy's hash is read from its attribute, a hook point takes
the arguments the hook passes), and returns what it found for the feature to install. A torch that fails a probe
(renamed, moved or changed an internal) turns that one feature off for the process, with one WARNING naming the
feature, the torch version and what failed, and the counter `torch_internals.off.<feature>`; nothing raises into the
user's program, and every other feature is unaffected. What each feature's loss costs is in its `lost` line.

The probes check what can be checked cheaply. Two features rest on more than a probe can show, and say so:
- `light_load` replaces three torch functions by pass-throughs that take over part of their work: it also requires
  the global names those functions read to be the ones it was checked against (`LIGHT_LOAD_READS`), which holds on
  every version in `TESTED`.
- `frame_cache`: Dynamo's guard serialization is exercised by every recorded frame; a frame whose guards cannot be
  serialized is not recorded (counted), so a changed serializer costs hits, never soundness.

The cache key holds torch's version and build: a cache written by one torch is a clean miss on another. Tested
versions (docs/guide/install.md, "Supported torch versions", has the runs): `TESTED`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("aotcache")

TESTED = ("2.13.0", "2.14.1", "2.15.0")


class Mismatch(Exception):
    """An internal exists but does not behave as the feature needs (the message says how)."""


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    title: str  # how the WARNING names it
    lost: str  # what the user loses while it is off
    internals: tuple[str, ...]  # the dotted paths the probe checks (all versions in TESTED)
    probe: Callable[[], dict[str, Any]]


FEATURES: dict[str, Feature] = {}
_lock = threading.Lock()
_resolved: dict[str, dict[str, Any] | None] = {}
_reasons: dict[str, str] = {}


def _feature(name: str, title: str, lost: str, internals: tuple[str, ...]) -> Callable[[Callable], Callable]:
    def register(probe: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        FEATURES[name] = Feature(name, title, lost, internals, probe)
        return probe

    return register


def resolve(name: str) -> dict[str, Any] | None:
    """The internals of feature `name` as its probe found them, or None when this torch fails the probe (the feature
    is off: one WARNING the first time). Never raises."""
    with _lock:
        if name in _resolved:
            return _resolved[name]
        feature = FEATURES[name]
        try:
            found = feature.probe()
        except Exception as e:
            found = None
            _reasons[name] = f"{type(e).__name__}: {e}"
            log.warning(
                "aotcache: %s is off: this torch (%s) fails the check of its internals (%s); %s",
                feature.title,
                torch.__version__,
                _reasons[name],
                feature.lost,
            )
            from aotcache import counters

            counters.record({f"torch_internals.off.{name}": 1}, None)
        _resolved[name] = found
        return found


def unavailable(name: str) -> str | None:
    """Why feature `name` is off in this process (after `resolve`), or None."""
    return _reasons.get(name)


def report() -> dict[str, str | None]:
    """Every feature, probed now if not yet: None where it is on, else why it is off."""
    return {name: (None if resolve(name) is not None else _reasons.get(name)) for name in FEATURES}


def _signature_takes(fn: Any, what: str, *names: str) -> inspect.Signature:
    signature = inspect.signature(fn)
    missing = [n for n in names if n not in signature.parameters]
    if missing:
        raise Mismatch(f"{what} takes no {missing}")
    return signature


# ---- the frame cache (frames/hooks.py) ------------------------------------------------------------------------------
@_feature(
    "frame_cache",
    "the frame cache",
    "compiled graphs are still cached",
    (
        "torch._dynamo.convert_frame._compile",
        "torch._dynamo.convert_frame.CheckFunctionManager",
        "torch._dynamo.guards.CheckFunctionManager.serialize_guards",
        "torch._dynamo.guards.GuardsStatePickler.reducer_override",
        "torch._dynamo.variables.functions.invoke_and_store_as_constant",
        "torch._dynamo.output_graph.DynamoTracerOutput._cleanup_output_graph (optional)",
        "torch._dynamo.variables.torch.TorchInGraphFunctionVariable.call_function",
        "torch._dynamo.variables.torch.constant_fold_functions",
        "torch._dynamo.variables.torch.constant_fold_functions_need_guards",
        "torch._dynamo.output_graph.OutputGraph.guard_on_key_order",
        "torch._C._dynamo.guards.GlobalStateGuard.__getstate__",
    ),
)
def _frame_cache() -> dict[str, Any]:
    import pickle

    from torch._dynamo import convert_frame
    from torch._dynamo import guards as dynamo_guards
    from torch._dynamo import output_graph as dynamo_output_graph
    from torch._dynamo.variables import functions as dynamo_functions
    from torch._dynamo.variables import nn_module as dynamo_nn_module

    compile_signature = _signature_takes(
        convert_frame._compile, "convert_frame._compile", "code", "globals", "locals", "compiler_fn"
    )
    if not isinstance(convert_frame.CheckFunctionManager, type):  # subclassed by the hook
        raise Mismatch("convert_frame.CheckFunctionManager is not a class")
    serialize = dynamo_guards.CheckFunctionManager.serialize_guards
    _signature_takes(serialize, "CheckFunctionManager.serialize_guards", "builder", "sorted_guards", "output_graph")
    if not issubclass(dynamo_guards.GuardsStatePickler, pickle.Pickler):
        raise Mismatch("GuardsStatePickler is not a pickle.Pickler")
    reduce = dynamo_guards.GuardsStatePickler.reducer_override
    constant = dynamo_functions.invoke_and_store_as_constant
    _signature_takes(constant, "invoke_and_store_as_constant", "tx", "fn", "name")
    # The process-state queries Dynamo folds (frames/process_state.py): the table, and the call that folds them.
    from torch._dynamo.variables import torch as dynamo_torch

    fold_call = dynamo_torch.TorchInGraphFunctionVariable.call_function
    _signature_takes(fold_call, "TorchInGraphFunctionVariable.call_function", "tx", "args", "kwargs")
    for table in ("constant_fold_functions", "constant_fold_functions_need_guards"):
        if not isinstance(getattr(dynamo_torch, table, None), dict):
            raise Mismatch(f"torch._dynamo.variables.torch.{table} is not a dict")
    if (
        torch.distributed.is_available()
        and torch.distributed.get_world_size not in dynamo_torch.constant_fold_functions
    ):
        raise Mismatch("constant_fold_functions lacks torch.distributed.get_world_size: the table moved")
    # The sets and dicts a trace iterated (their order is read on load: read_set.ORDER_KIND).
    if "guard_on_key_order" not in inspect.getsource(dynamo_output_graph.OutputGraph.__init__):
        raise Mismatch("OutputGraph keeps no guard_on_key_order: which containers a trace iterated is unknown")
    state = torch._C._dynamo.guards.GlobalStateGuard().__getstate__()
    if not isinstance(state, str) or "grad_mode" not in state:
        raise Mismatch("GlobalStateGuard's state is not the JSON text of the global state")
    return {
        "torch_function_class": dynamo_torch.TorchInGraphFunctionVariable,
        "torch_function_call": fold_call,
        "convert_frame": convert_frame,
        "dynamo_guards": dynamo_guards,
        "dynamo_output_graph": dynamo_output_graph,
        "dynamo_functions": dynamo_functions,
        "dynamo_nn_module": dynamo_nn_module,
        "compile": convert_frame._compile,
        "compile_signature": compile_signature,
        "check_function_manager": convert_frame.CheckFunctionManager,
        "serialize_guards": serialize,
        "reducer_override": reduce,
        "invoke_and_store_as_constant": constant,
    }


# ---- serializable compiles (compiler.py) ----------------------------------------------------------------------------
@_feature(
    "torch_cache_sandbox",
    "the graph cache",
    "every graph is compiled as backend='inductor' would (counted bypass.torch_internals)",
    (
        "torch._inductor.codecache.FxGraphCache._get_tmp_dir",
        "torch._functorch._aot_autograd.autograd_cache.AOTAutogradCache._get_tmp_dir",
        "torch.utils._config_module._UNSET_SENTINEL",
        "torch._inductor.config._config[...].env_value_force",
        "torch._inductor.standalone_compile.AOTCompiledArtifact",
    ),
)
def _torch_cache_sandbox() -> dict[str, Any]:
    """Torch's own caches must run (to make a compile serializable) inside a throw-away directory: checked by where
    torch then puts an entry, not by the helper's name."""
    from unittest import mock

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor.codecache import FxGraphCache
    from torch._inductor.standalone_compile import AOTCompiledArtifact
    from torch.utils._config_module import _UNSET_SENTINEL

    sandbox = os.path.join(os.sep, "aotcache-probe")
    with (
        mock.patch.object(FxGraphCache, "_get_tmp_dir", staticmethod(lambda: os.path.join(sandbox, "fx"))),
        mock.patch.object(AOTAutogradCache, "_get_tmp_dir", classmethod(lambda cls: os.path.join(sandbox, "aot"))),
    ):
        fx_path = FxGraphCache._get_tmp_dir_for_key("fabcdef")
        aot_path = AOTAutogradCache._get_tmp_dir_for_key("aabcdef")
    for what, path in (("FxGraphCache", fx_path), ("AOTAutogradCache", aot_path)):
        if not path.startswith(sandbox + os.sep):
            raise Mismatch(f"{what} writes to {path!r}, not under its redirected _get_tmp_dir")
    for module, name in (
        (inductor_config, "fx_graph_cache"),
        (inductor_config, "fx_graph_remote_cache"),
        (functorch_config, "enable_autograd_cache"),
        (functorch_config, "enable_remote_autograd_cache"),
    ):
        entry = module._config.get(name)
        if entry is None or not hasattr(entry, "env_value_force"):
            raise Mismatch(f"{module.__name__}.{name} has no config entry with env_value_force")
    if not callable(getattr(torch._inductor, "standalone_compile", None)):
        raise Mismatch("torch._inductor.standalone_compile is missing")
    return {
        "FxGraphCache": FxGraphCache,
        "AOTAutogradCache": AOTAutogradCache,
        "AOTCompiledArtifact": AOTCompiledArtifact,
        "UNSET": _UNSET_SENTINEL,
    }


@_feature(
    "checkpoint_policy_pin",
    "caching graphs with selective-checkpoint policies",
    "such graphs are compiled without caching unless their policy has a cache_hash (torch's own rule)",
    ("torch._functorch._aot_autograd.autograd_cache._get_context_fn_cache_hash",),
)
def _checkpoint_policy_pin() -> dict[str, Any]:
    from torch._functorch._aot_autograd import autograd_cache

    get_hash = autograd_cache._get_context_fn_cache_hash

    def with_hash() -> None: ...

    def without_hash() -> None: ...

    with_hash.cache_hash = "aotcache-probe"  # type: ignore[attr-defined]
    if get_hash(with_hash) != "aotcache-probe" or get_hash(without_hash) is not None:
        raise Mismatch("_get_context_fn_cache_hash does not read a policy's cache_hash, None without one")
    return {"module": autograd_cache, "get_hash": get_hash}


# ---- kernel bundles (kernels.py) ------------------------------------------------------------------------------------
@_feature(
    "kernel_bundles",
    "kernel bundles",
    "entries carry no compiled kernels: a new machine compiles them on first load",
    (
        "torch._inductor.codecache.CppCodeCache.load_async",
        "torch._inductor.codecache._precompile_header",
        "torch._inductor.codecache.CppTorchDeviceOptions",
        "torch._inductor.runtime.cache_dir_utils.cache_dir",
    ),
)
def _kernel_bundles() -> dict[str, Any]:
    from torch._inductor import codecache
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    load_async = codecache.CppCodeCache.__dict__.get("load_async")
    if not isinstance(load_async, classmethod):
        raise Mismatch("CppCodeCache.load_async is not a classmethod of CppCodeCache")
    _signature_takes(load_async.__func__, "CppCodeCache.load_async", "main_code")
    header = codecache._precompile_header
    params = list(inspect.signature(getattr(header, "_aotcache_replaces", header)).parameters.values())
    if [p.name for p in params[:2]] != ["header", "hashable_cmd_line"] or params[-1].kind != params[-1].VAR_KEYWORD:
        raise Mismatch("_precompile_header is not (header, hashable_cmd_line, **compile_command)")
    options = getattr(codecache.CppTorchDeviceOptions, "_aotcache_replaces", codecache.CppTorchDeviceOptions)
    if not isinstance(options, type):
        raise Mismatch("CppTorchDeviceOptions is not a class")
    if not isinstance(cache_dir(), str):
        raise Mismatch("cache_dir() does not return a path")
    return {"codecache": codecache, "cache_dir": cache_dir}


# ---- the vector-ISA probe memo (isa_probe.py) -----------------------------------------------------------------------
@_feature(
    "isa_probe_memo",
    "the vector-ISA probe memo",
    "each process runs torch's own vector-ISA probe (a compiler run)",
    (
        "torch._inductor.cpu_vec_isa.valid_vec_isa_list.cache_info",
        "torch._inductor.cpu_vec_isa.VecISA.check_build",
        "torch._inductor.cpu_vec_isa.x86_isa_checker",
    ),
)
def _isa_probe_memo() -> dict[str, Any]:
    from torch._inductor import cpu_vec_isa

    info = getattr(cpu_vec_isa.valid_vec_isa_list, "cache_info", None)
    if info is None or not hasattr(info(), "currsize"):
        raise Mismatch("valid_vec_isa_list is not a functools cache")
    check_build = cpu_vec_isa.VecISA.__dict__.get("check_build")
    if not inspect.isfunction(check_build) or list(inspect.signature(check_build).parameters)[:2] != ["self", "code"]:
        raise Mismatch("VecISA.check_build is not a method (self, code)")
    features = cpu_vec_isa.x86_isa_checker()
    if not isinstance(features, list | tuple):
        raise Mismatch("x86_isa_checker() does not return a list")
    return {"cpu_vec_isa": cpu_vec_isa, "VecISA": cpu_vec_isa.VecISA, "check_build": check_build}


# ---- the light load (wrapper_loading.py) ----------------------------------------------------------------------------
@_feature(
    "light_load",
    "light loading",
    "a warm process imports Inductor's compiler to load graphs (~0.3 s)",
    (
        "torch._inductor.codecache._reload_python_module",
        "torch._inductor.codecache.FxGraphCache.cache_hit_post_compile",
        "torch._inductor.output_code.CompiledFxGraph.__call__",
    ),
)
def _light_load() -> dict[str, Any]:
    found = light_load_functions()
    _signature_takes(found["_reload_python_module"], "_reload_python_module", "key", "path")
    _signature_takes(found["FxGraphCache.cache_hit_post_compile"], "cache_hit_post_compile", "graph", "cache_info")
    differing = differing_light_load_functions(found)
    if differing:
        raise Mismatch(f"{', '.join(differing)} read other global names than in torch {LIGHT_LOAD_CHECKED_ON}")
    return found


# The global names each function the light load replaces reads, as in the torch its pass-throughs were checked
# against: the pass-throughs take over part of their work, so a torch whose functions read anything else keeps its
# own path (test_wrapper_loading pins these against the installed torch; 2.14.1 and 2.15.0 read the same, built-in
# exception names aside).
LIGHT_LOAD_CHECKED_ON = "2.13.0"
LIGHT_LOAD_READS = {
    "_reload_python_module": frozenset(
        "Exception ModuleType RuntimeError __dict__ __file__ __name__ compile exec key modules open read sys "
        "type".split()
    ),
    "FxGraphCache.cache_hit_post_compile": frozenset(
        "AutotuneCacheBundler CachedMetricsHelper CompileEventLogger GraphLowering OSError TritonBundler "
        "_set_compile_context_for_autotune_cache _triton_bundle add_to_set after_deserialization apply_deltas "
        "autotune_cache begin_compile cached_kernel_names counter_deltas counters debug get_metrics_context graph "
        "in_progress increment_toplevel inductor_meta_from_config inductor_provenance_stack_traces_str len metrics "
        "metrics_deltas output_code_log read_and_emit save_output_code source_code str trace_structured try_ "
        "try_add_pt2_compile".split()
    ),
    "CompiledFxGraph.__call__": frozenset(
        "AutotuneCacheBundler GRAPH_COMPILE_IDS GRAPH_EXECUTION_ORDER RECORD_GRAPH_EXECUTION _C _RecordFunctionFast "
        "_compile_context _fx_graph_cache_key _inductor _is_profiler_enabled _profiler append autograd "
        "compile_context contextlib current_callable debug end_compile finish fx_kwargs get "
        "get_runtime_metrics_context has_active_compile nullcontext profiler torch".split()
    ),
}


def light_load_functions() -> dict[str, Any]:
    """The torch functions the light load replaces (torch's own, also once replaced), by the names of
    `LIGHT_LOAD_READS`."""
    from torch._inductor import codecache, output_code

    found = {
        "_reload_python_module": codecache._reload_python_module,
        "FxGraphCache.cache_hit_post_compile": codecache.FxGraphCache.cache_hit_post_compile,
        "CompiledFxGraph.__call__": output_code.CompiledFxGraph.__call__,
    }
    return {name: getattr(fn, "_aotcache_replaces", fn) for name, fn in found.items()}


def _is_builtin_exception(name: str) -> bool:
    import builtins

    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def meaningful(names: Any) -> frozenset[str]:
    """The global names a function reads that can change what it does when it succeeds: all but the built-in
    exception classes it may raise. torch 2.14 writes `if x is None: raise AssertionError(...)` where 2.13 wrote
    `assert x is not None`: the same check, one new name, which must not turn the light path off."""
    return frozenset(n for n in names if not _is_builtin_exception(n))


def differing_light_load_functions(found: dict[str, Any] | None = None) -> list[str]:
    """The replaced torch functions (`found`, else looked up) that read other global names than `LIGHT_LOAD_READS`
    says (built-in exception classes aside: `meaningful`)."""
    found = found if found is not None else light_load_functions()
    return [
        name
        for name, names in LIGHT_LOAD_READS.items()
        if meaningful(found[name].__code__.co_names) != meaningful(names)
    ]


# ---- torch.compile's default backend routed through aotcache (default_backend.py) ---------------------------------
@_feature(
    "default_backend_routing",
    "aotcache.enable()",
    "torch.compile's default backend stays inductor (use backend='aotcache' explicitly)",
    ("torch._TorchCompileInductorWrapper.__init__", "torch._TorchCompileInductorWrapper.__call__"),
)
def _default_backend_routing() -> dict[str, Any]:
    cls = getattr(torch, "_TorchCompileInductorWrapper", None)
    if not isinstance(cls, type):
        raise Mismatch("torch._TorchCompileInductorWrapper is not a class")
    init, call = cls.__dict__.get("__init__"), cls.__dict__.get("__call__")
    if not callable(init) or not callable(call):
        raise Mismatch("torch._TorchCompileInductorWrapper defines no __init__ and __call__ of its own")
    _signature_takes(getattr(init, "__wrapped__", init), "_TorchCompileInductorWrapper.__init__", "mode", "options")
    _signature_takes(getattr(call, "__wrapped__", call), "_TorchCompileInductorWrapper.__call__", "config_patches")
    return {"wrapper": cls}
