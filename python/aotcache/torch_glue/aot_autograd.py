"""AOTAutograd and torch's own caches of a compile: the switches aotcache turns while it compiles, the sandbox that
makes a compile serializable (compiler.py), the checkpoint-policy hash. Every private name of them aotcache uses is
lent from `_LENT`.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from aotcache.torch_glue.features import Mismatch, feature
from aotcache.torch_glue.lazy import lender

_LENT = {
    "functorch_config": "torch._functorch.config",
    "autograd_cache": "torch._functorch._aot_autograd.autograd_cache",
    "UNSET_SENTINEL": "torch.utils._config_module:_UNSET_SENTINEL",
}
__getattr__ = lender(globals(), _LENT)


# ---- serializable compiles (compiler.py) ----------------------------------------------------------------------------
@feature(
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


@feature(
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
