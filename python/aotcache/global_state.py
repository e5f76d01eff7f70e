"""The global state that decides what a compile produces: autograd state, configs, environment, user salt.

Each is a plain dict of plain values, hashed by the C++ key as one manifest component.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
from typing import Any

import torch

from aotcache.errors import Bypass
from aotcache.torch_glue import dispatch
from aotcache.torch_glue import dynamo as dynamo_glue
from aotcache.torch_glue.aot_autograd import functorch_config
from aotcache.torch_glue.inductor import inductor_config

# Fields that steer torch's own caches, logging or worker processes: they never change the compiled code, and
# keeping them out means a user who toggles torch's caches still hits. (Docs: docs/formats/key-encoding.md.)
_CONFIG_FIELDS_WITHOUT_EFFECT = {
    "inductor": {
        "fx_graph_cache",
        "fx_graph_remote_cache",
        "autotune_local_cache",
        "autotune_remote_cache",
        "bundled_autotune_remote_cache",
        "non_blocking_remote_cache_write",
        "worker_log_path",
        "worker_suppress_logging",
        "torchinductor_worker_logpath",
        "compile_worker_wait_timeout",
        "compile_threads",
        "worker_start_method",
        "triton.autotune_at_compile_time",
    },
    "functorch": {
        "enable_autograd_cache",
        "enable_remote_autograd_cache",
        "bundled_autograd_cache",
        "strict_autograd_cache",
        "force_autograd_cache",
        "bypass_autograd_cache_key",
        "force_non_lazy_backward_lowering",
    },
}

# Fields that torch's portable config leaves out (its own ignore lists) but that can change the compile: keyed
# here when they hold plain values; a callable or object (a user pass, a choices class) bypasses until it can be
# pinned by a stable identity. Paths (cutlass_dir) and debug tracing stay out.
_HOOK_FIELDS = {
    "inductor": (
        "pre_grad_custom_pass",
        "post_grad_custom_pre_pass",
        "post_grad_custom_post_pass",
        "joint_custom_pre_pass",
        "joint_custom_post_pass",
        "custom_partitioner_fn",
        "_pre_fusion_custom_pass",
        "_post_fusion_custom_pass",
        "_fuse_ddp_communication_passes",
        "inductor_choices_class",
        "cudagraph_policy",
        "pre_grad_pass_timing",
        "force_disable_cudagraph_TESTING_ONLY",
        "trace.provenance_tracking_level",
    ),
    "functorch": (
        "joint_custom_pass",
        "activation_memory_budget_runtime_estimator",
        "activation_memory_budget_solver",
    ),
}


def autograd_state() -> dict[str, Any]:
    autocast = {}
    for device in dispatch.autocast_supported_devices():
        try:
            autocast[device] = [torch.is_autocast_enabled(device), str(torch.get_autocast_dtype(device))]
        except RuntimeError:  # a backend that is not built in: it cannot be enabled either
            autocast[device] = None
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    cpp = inductor_config.cpp
    return {
        "grad_enabled": torch.is_grad_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        # Graphs without tensor inputs run on the current device; Inductor bakes the index into the code.
        "current_device": None
        if accelerator is None
        else f"{accelerator.type}:{torch.accelerator.current_device_index()}",
        # Inductor's C++ kernels are specialized on the thread count unless it is set or dynamic.
        "cpp_threads": torch.get_num_threads() if cpp.threads < 1 and not cpp.dynamic_threads else None,
        "inference_mode": torch.is_inference_mode_enabled(),
        "autocast": autocast,
        "autocast_cache": torch.is_autocast_cache_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "fill_uninitialized_memory": bool(torch.utils.deterministic.fill_uninitialized_memory),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "fp16_reduced_precision": bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
        "bf16_reduced_precision": bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
        "sdpa": attention_backends(),
        "rebound_torch": rebound_torch_functions(),
        "compile_tables": user_compile_table_entries(),
    }


def rebound_torch_functions() -> dict[str, str]:
    """{name: digest of what it holds now} of the functions of the `torch` namespace that hold something other than
    torch's own (`torch.exp = lambda t: ...`): decompositions and lowerings call them by name while compiling
    (softmax's decomposition calls torch.exp), so such a process compiles other code. Empty in a process that rebinds
    none. A replacement that cannot be digested is named by its type (keyed apart from torch's; a miss, never a
    false hit)."""
    from aotcache.capture import code_digest

    namespace = vars(torch)
    out = {}
    for name, expected in _torch_originals():
        value = namespace.get(name)
        if value is expected or value is None:
            continue
        # Its bytecode (what runs, whatever its file says now) and, where readable, its source with what it reads.
        try:
            out[name] = f"{_fallback_digest(value)}:{code_digest.function_digest(value)}"
        except Exception:  # no source (a lambda typed at a prompt), or not a Python function
            out[name] = _fallback_digest(value)
    return out


# Inductor's tables of what compiling an op means: a decomposition (run while AOTAutograd traces) and a lowering (run
# while Inductor generates code) per op. A process that registers its own (`decompositions[aten.gelu.default] = fn`,
# `register_lowering`, a library doing so at import) compiles other code from the same graph.
_COMPILE_TABLES = (("decompositions", "torch._inductor.decomposition"), ("lowerings", "torch._inductor.lowering"))
# table -> (its (op, function) pairs that are torch's own, those ops), when first seen
_torch_entries: dict[str, tuple[frozenset, frozenset]] = {}
_entry_digests: dict[int, tuple[Any, str]] = {}
_last_tables: dict[str, tuple[list, list, dict[str, str]]] = {}  # table -> (keys, values, its entries) last seen


def _torch_owned(fn: Any) -> bool:
    """Defined in torch's own modules: a function by the module its code runs in (functools.wraps copies a
    `__module__` of what it wraps, "functools" for a partial), anything else by its class's module."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    scope = getattr(fn, "__globals__", None)
    module = scope.get("__name__", "") if isinstance(scope, dict) else getattr(type(fn), "__module__", "")
    return module == "torch" or module.startswith("torch.")


def user_compile_table_entries() -> dict[str, str]:
    """{"table:op": digest} of every entry of Inductor's decomposition and lowering tables that is not torch's own:
    a function of another module, or torch's function moved to another op. Empty in a process that registers none.
    A table whose module is not imported is empty here (nothing could have registered into it); torch's own entries
    registered later (a lowering added when its module is imported) are not keyed. An unchanged table costs two list
    comparisons by identity per call (tens of microseconds); the full scan runs once per table and process."""
    out: dict[str, str] = {}
    for attr, table in _effective_tables():
        keys, values = list(table), list(table.values())
        last = _last_tables.get(attr)
        if last is not None and last[0] == keys and last[1] == values:
            out.update(last[2])
            continue
        found = _user_entries(attr, table)
        _last_tables[attr] = (keys, values, found)
        out.update(found)
    return out


def _effective_tables() -> list[tuple[str, dict]]:
    """(name, table) of the tables the next compile uses. Inductor decomposes with a copy of its decomposition table
    made at the process's first compile (`fast_random_decomps`, cached), unless a config makes it use the table
    itself: an entry registered after that compile changes nothing, one registered before is in the copy."""
    out = []
    for attr, module_name in _COMPILE_TABLES:
        module = sys.modules.get(module_name)
        table = getattr(module, attr, None) if module is not None else None
        if not isinstance(table, dict):
            continue
        if attr == "decompositions" and not (
            inductor_config.fallback_random or getattr(inductor_config, "fallback_embedding_bag_byte_unpack", False)
        ):
            copy = getattr(module, "fast_random_decomps", None)
            info = getattr(copy, "cache_info", None)
            if info is not None and info().currsize:
                cached = copy()  # the cached copy: calling it again makes nothing
                if isinstance(cached, dict):
                    out.append(("decompositions.copy", cached))
                    continue
        out.append((attr, table))
    return out


def _user_entries(attr: str, table: dict) -> dict[str, str]:
    if attr not in _torch_entries:
        pairs = frozenset((op, fn) for op, fn in table.items() if _torch_owned(fn))
        _torch_entries[attr] = (pairs, frozenset(op for op, _ in pairs))
    own, own_ops = _torch_entries[attr]
    out: dict[str, str] = {}
    for op, fn in set(table.items()) - own:
        if _torch_owned(fn) and op not in own_ops:
            continue  # torch's own, registered after the scan
        out[f"{attr.split('.')[0]}:{op}"] = _entry_digest(fn)
    return out


def _entry_digest(fn: Any) -> str:
    cached = _entry_digests.get(id(fn))
    if cached is not None and cached[0] is fn:
        return cached[1]
    from aotcache.capture import code_digest

    inner, args = fn, []
    while isinstance(inner, functools.partial):
        args.append(repr((inner.args, sorted(inner.keywords.items()))))
        inner = inner.func
    try:
        digest = f"{_fallback_digest(inner)}:{code_digest.function_digest(inner)}"
    except Exception:
        digest = _fallback_digest(inner)
    if args:
        digest += ":" + "|".join(args)
    _entry_digests[id(fn)] = (fn, digest)
    return digest


def _fallback_digest(value: Any) -> str:
    """A replacement's bytecode and defaults where its source cannot be read; else its type and repr (without the
    address: a miss between processes, never a false hit)."""
    import hashlib
    import marshal
    import re

    code = getattr(value, "__code__", None)
    if code is not None:
        h = hashlib.sha256(marshal.dumps(code))
        h.update(repr(getattr(value, "__defaults__", None)).encode())
        return "code:" + h.hexdigest()
    return f"<{type(value).__module__}.{type(value).__qualname__}:{re.sub(' at 0x[0-9a-f]+', '', repr(value))}>"


@functools.cache
def _torch_originals() -> tuple[tuple[str, Any], ...]:
    """(name, torch's own function) of every function torch's __init__ exports from its C function table, or the
    Python wrapper of that name torch.functional defines instead (einsum, norm, split...)."""
    import torch.functional as torch_functional

    variable_functions = dispatch.VariableFunctions
    wrappers = set(getattr(torch_functional, "__all__", ()))
    out = []
    for name in dir(variable_functions):
        if name.startswith("__"):
            continue
        expected = vars(torch_functional)[name] if name in wrappers else getattr(variable_functions, name)
        out.append((name, expected))
    return tuple(out)


def attention_backends() -> dict[str, Any]:
    """The scaled-dot-product-attention switches (`sdpa_kernel(...)`, `torch.backends.cuda.enable_*_sdp`, the
    priority order): lowering picks the attention kernel a graph calls from them, on CPU too. Every no-argument
    getter torch._C has for them, found by name: a torch that adds a backend switch is keyed without a change here."""
    out: dict[str, Any] = {}
    for name in _attention_getters():
        try:
            value = getattr(dispatch.torch_C, name)()
        except Exception as e:  # a getter that needs arguments or a backend not built in: by the failure
            value = f"<{type(e).__name__}>"
        out[name] = list(value) if isinstance(value, (list, tuple)) else value
    return out


@functools.cache
def _attention_getters() -> tuple[str, ...]:
    return tuple(sorted(n for n in dir(dispatch.torch_C) if n.startswith("_get_") and "sdp" in n))


def _check_plain(value: Any, where: str) -> None:
    if value is None or type(value) in (bool, int, float, str):
        return
    if type(value) in (list, tuple):
        for v in value:
            _check_plain(v, where)
        return
    if type(value) is dict:
        for k, v in value.items():
            _check_plain(k, where)
            _check_plain(v, where)
        return
    raise Bypass("unencodable_config", f"{where} holds a {type(value).__module__}.{type(value).__qualname__}")


def _portable_fields(module: Any) -> dict[str, Any]:
    """`module.save_config_portable(ignore_private_configs=False)`, without importing Inductor's compiler where that
    changes nothing. torch 2.15's Inductor config has a serializer (`_serialize_inductor_choices`) that imports
    `torch._inductor.choices` (and with it the compiler: a warm process's light load exists to avoid that) to turn
    `inductor_choices_class` into a cache key; while that field is None (the default) it leaves the dict as it is,
    so it is hidden for the call (the module's own attribute, through its `__dict__`: config modules refuse
    assignments of non-config names)."""
    serializer = module.__dict__.get("_cache_config_serializer")
    if (
        serializer is not None
        and getattr(serializer, "__name__", None) == "_serialize_inductor_choices"
        and getattr(module, "inductor_choices_class", None) is None
    ):
        module.__dict__["_cache_config_serializer"] = None
        try:
            return module.save_config_portable(ignore_private_configs=False)
        finally:
            module.__dict__["_cache_config_serializer"] = serializer
    return module.save_config_portable(ignore_private_configs=False)


def _portable(module: Any, name: str) -> dict[str, Any]:
    skip = _CONFIG_FIELDS_WITHOUT_EFFECT[name]
    fields = _portable_fields(module)
    out = {k: v for k, v in sorted(fields.items()) if k not in skip}
    for k, v in out.items():
        _check_plain(v, f"{name} config field {k}")
    return out


def _get_field(module: Any, dotted: str) -> Any:
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
    return obj


def _hooks(module: Any, name: str) -> dict[str, Any]:
    out = {}
    for field in _HOOK_FIELDS[name]:
        value = _get_field(module, field)
        items = value if isinstance(value, (list, tuple)) else [value]
        if any(callable(v) or isinstance(v, type) for v in items):
            raise Bypass("custom_pass", f"{name} config {field} holds a callable; custom passes are not keyed yet")
        _check_plain(value, f"{name} config {field}")
        out[field] = value
    return out


def _out_of_tree_backends() -> None:
    from aotcache.torch_glue.inductor import custom_backend_codegen_configs, custom_backend_passes

    if any(custom_backend_passes.values()) or any(custom_backend_codegen_configs.values()):
        raise Bypass("custom_pass", "an out-of-tree Inductor backend registered custom passes or codegen configs")


def config_state(backend_options: dict[str, Any]) -> dict[str, Any]:
    _check_plain(backend_options, "backend option")
    _out_of_tree_backends()
    return {
        "inductor": _portable(inductor_config, "inductor"),
        "functorch": _portable(functorch_config, "functorch"),
        "inductor_hooks": _hooks(inductor_config, "inductor"),
        "functorch_hooks": _hooks(functorch_config, "functorch"),
        "backend_options": dict(sorted(backend_options.items())),
        "cache_key_tag": torch.compiler.config.cache_key_tag,
    }


ENVIRONMENT_OVERRIDE_VAR = "AOTCACHE_ENVIRONMENT_OVERRIDE"


@functools.cache
def _probed_environment() -> dict[str, Any]:
    """What the machine and build are: fixed for the life of the process, probed once."""
    from aotcache.torch_glue.inductor import cpp_builder, pick_vec_isa

    cxx = cpp_builder.get_cpp_compiler()
    # Ordered so that the one-line summary shows the fields people compare first.
    env: dict[str, Any] = {
        "torch": str(torch.__version__),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platform": f"{sys.platform}-{platform.machine()}",
        # The vector ISA Inductor generates C++ kernels for, and the compiler that builds them.
        "vec_isa": str(pick_vec_isa()),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "gpus": [],
        "triton": None,
        "cxx": cxx,
        "torch_git": torch.version.git_version,
        "cxx_version": cpp_builder.get_compiler_version_info(cxx),
    }
    if torch.cuda.is_available():
        env["gpus"] = [
            [torch.cuda.get_device_name(i), list(torch.cuda.get_device_capability(i))]
            for i in range(torch.cuda.device_count())
        ]
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
    return env


def environment() -> dict[str, Any]:
    """The environment component. AOTCACHE_ENVIRONMENT_OVERRIDE (a JSON object) replaces fields: for tests that
    simulate another torch, Python or CPU, never for production use."""
    env = dict(_probed_environment())
    override = os.environ.get(ENVIRONMENT_OVERRIDE_VAR)
    if override:
        try:
            fields = json.loads(override)
        except json.JSONDecodeError as e:
            raise Bypass("bad_environment_override", f"{ENVIRONMENT_OVERRIDE_VAR} is not JSON: {e}") from None
        if not isinstance(fields, dict):
            raise Bypass("bad_environment_override", f"{ENVIRONMENT_OVERRIDE_VAR} must be a JSON object")
        _check_plain(fields, ENVIRONMENT_OVERRIDE_VAR)
        env.update(fields)
    return env


def user_state(salt: str) -> dict[str, Any]:
    return {"salt": salt}


# Dynamo config fields that are paths of this process, not inputs of tracing (torch marks both compile_ignored: debug
# and leaves them out of its own config comparisons): debug_dir_root defaults to the working directory's
# torch_compile_debug, base_dir to torch's install directory. Keyed, they made a frame miss in every other working
# directory (or virtual environment location) while its graphs hit.
_FRAME_CONFIG_PATHS = {"dynamo": ("debug_dir_root", "base_dir")}


def frame_config() -> dict[str, Any]:
    """Dynamo's and torch.compiler's configs, for the key of a frame entry: they decide what tracing produces. A
    value that is not plain enters as its repr (an address in it only costs hits, never soundness)."""

    def plain(value: Any) -> Any:
        if isinstance(value, (set, frozenset)):  # a set's repr follows the process's string hashing
            return sorted(repr(v) for v in value)
        try:
            _check_plain(value, "")
            return value
        except Bypass:
            return repr(value)

    out: dict[str, Any] = {}
    for name, module in (("dynamo", dynamo_glue.dynamo_config), ("compiler", torch.compiler.config)):
        fields = module.save_config_portable(ignore_private_configs=False)
        skip = _FRAME_CONFIG_PATHS.get(name, ())
        out[name] = {k: plain(v) for k, v in sorted(fields.items()) if k not in skip}
    out["python"] = sys.version  # bytecode and the standard library Dynamo inlines: the exact version
    return out
