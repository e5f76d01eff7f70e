"""The frame Dynamo is about to compile, and its key: which frames are frame-cached (frames on, the aotcache backend
under Dynamo's wrappers, the routed default backend or the DDP optimizer), and the key of one (the code by content,
the module, configs, environment, salt)."""

from __future__ import annotations

import dataclasses
import logging
import sys
import types
from typing import Any

from aotcache import (
    _core,
    compiler,
    counters,
    default_routing,
    global_state,
    isa_probe,
    settings,
)
from aotcache.errors import Bypass
from aotcache.frames import (
    content,
    counting,
    ddp_split,
)
from aotcache.storage import opened
from aotcache.torch_glue import compile_entry

log = logging.getLogger("aotcache")


@dataclasses.dataclass
class Frame:
    code: types.CodeType
    f_globals: dict[str, Any]
    f_locals: dict[str, Any]
    closure: tuple | None
    cfg: settings.Settings
    tiers: Any  # storage.tiered.TieredStore
    key: _core.CacheKey


def backend_options(compiler_fn: Any, ddp: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The Inductor options of an aotcache compile (None when `compiler_fn` is not the aotcache backend): the
    backend sits under Dynamo's wrappers (_TorchCompileWrapper holds mode and options), and under the DDP optimizer
    for a frame of a DistributedDataParallel module (its split layout is then put into `ddp`)."""
    mode, options = None, None
    fn = compiler_fn
    for _ in range(8):
        routed = default_routing.routed_options(fn)  # torch.compile's default backend, routed by aotcache.enable()
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
        if isinstance(fn, compile_entry.TorchCompileWrapper):
            mode, options = fn.kwargs.get("mode"), fn.kwargs.get("options")
            fn = fn.compiler_fn
            continue
        inner = getattr(fn, "_torchdynamo_orig_backend", None) or getattr(fn, "compiler_fn", None)
        if inner is None or inner is fn:
            return None
        fn = inner
    return None


def frame_of(arguments: dict[str, Any]) -> Frame | None:
    """The frame to look up, or None when it is not frame-cached (frames off, another backend, export)."""
    cfg = settings.current()
    if not cfg.frames or not cfg.enabled or arguments.get("export"):
        return None
    ddp: dict[str, Any] = {}
    options = backend_options(arguments.get("compiler_fn"), ddp)
    if options is None:
        return None
    tiers = opened.tiers(cfg)
    if tiers is None:
        return None
    code, f_globals = arguments["code"], arguments["globals"]
    module = f_globals.get("__name__")

    if not isinstance(module, str) or getattr(sys.modules.get(module), "__dict__", None) is not f_globals:
        counting.count({"frames.bypasses": 1, "frames.bypass.no_module": 1}, None, tiers.local)
        return None
    try:
        config = global_state.config_state(options)
    except Bypass as b:
        counting.count({"frames.bypasses": 1, f"frames.bypass.{b.code}": 1}, None, tiers.local)
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
    return Frame(code, f_globals, arguments["locals"], arguments.get("closure"), cfg, tiers, key)
