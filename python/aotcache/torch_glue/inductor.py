"""Inductor: its configuration, code cache, kernels' C++ builds, vector ISAs, decomposition and lowering tables,
the compile and load of a graph; and the features that rest on them (kernel bundles, the ISA probe memo, the light
load). Every private Inductor name aotcache uses is lent from `_LENT`.
"""

from __future__ import annotations

import inspect
from typing import Any

from aotcache.torch_glue.features import Mismatch, feature, signature_takes
from aotcache.torch_glue.lazy import lender

_LENT = {
    "inductor_config": "torch._inductor.config",
    # compile and load (compiler.py, wrapper_loading.py)
    "compile_fx": "torch._inductor.compile_fx:compile_fx",
    "standalone_compile": "torch._inductor:standalone_compile",
    "list_mode_options": "torch._inductor:list_mode_options",
    "AOTCompiledArtifact": "torch._inductor.standalone_compile:AOTCompiledArtifact",
    "codecache": "torch._inductor.codecache",
    "output_code": "torch._inductor.output_code",
    "metrics": "torch._inductor.metrics",
    "extern_kernels": "torch._inductor.select_algorithm:extern_kernels",
    "AutotuneCacheBundler": "torch._inductor.runtime.autotune_cache:AutotuneCacheBundler",
    "select_decomp_table": "torch._inductor.decomposition:select_decomp_table",
    # kernels and the machine they are built for (kernels.py, machine.py, isa_probe.py, global_state.py)
    "cache_dir": "torch._inductor.runtime.cache_dir_utils:cache_dir",
    "cpp_builder": "torch._inductor.cpp_builder",
    "cpu_vec_isa": "torch._inductor.cpu_vec_isa",
    "x86_isa_checker": "torch._inductor.cpu_vec_isa:x86_isa_checker",
    "pick_vec_isa": "torch._inductor.cpu_vec_isa:pick_vec_isa",
    # what a backend may register that changes code generation (global_state.py)
    "custom_backend_codegen_configs": "torch._inductor.codegen.common:custom_backend_codegen_configs",
    "custom_backend_passes": "torch._inductor.codegen.common:custom_backend_passes",
}
__getattr__ = lender(globals(), _LENT)


# ---- kernel bundles (kernels.py) ------------------------------------------------------------------------------------
@feature(
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
    signature_takes(load_async.__func__, "CppCodeCache.load_async", "main_code")
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
@feature(
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
@feature(
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
    signature_takes(found["_reload_python_module"], "_reload_python_module", "key", "path")
    signature_takes(found["FxGraphCache.cache_hit_post_compile"], "cache_hit_post_compile", "graph", "cache_info")
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
