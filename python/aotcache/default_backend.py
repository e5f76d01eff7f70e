"""torch.compile's default backend through aotcache, with no change to the code that calls torch.compile.

    aotcache.enable()            from code, before or after torch.compile() calls (effective at the next compile)
    AOTCACHE_ENABLE=1            in the environment: the interpreter enables it when torch is imported (startup.py)
    aotcache run -- <command>    sets AOTCACHE_ENABLE=1 for a whole process tree (torchrun, accelerate launch, ...)

Frameworks (the Hugging Face Trainer, accelerate, Lightning, torchtitan) call `torch.compile(model, mode=...)` with
the default backend "inductor" and give the user no say in the name. torch.compile wraps that request in
`torch._TorchCompileInductorWrapper`: its `config` holds the Inductor options (the mode's and the options'), and
its `__call__(gm, example_inputs)` compiles with compile_fx. enable() replaces two methods of that class (not of its
AOTInductor subclass, `use_aoti`):
- `__init__` imports aotcache.backend at torch.compile(), as torch.compile(backend="aotcache") does through the
  backend registry: the frame cache's hooks must be in place before Dynamo converts the first frame;
- `__call__` compiles through `aotcache_backend` with the wrapper's options (and any config patches Dynamo's callers
  add, merged as torch merges them). A wrapper with a region name (`torch.compile(name=...)`) stays on compile_fx.
The frame cache treats a routed wrapper as the aotcache backend with those options (frames/hooks.py).

Every contact with the wrapper is here; its shape is checked in torch_glue/compile_entry.py (feature
`default_backend_routing`). A torch whose wrapper does not have it: one WARNING, nothing routed, the program runs on
plain inductor; nothing raises into the user's program.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from aotcache import default_routing, torch_glue
from aotcache.torch_glue.patching import Patches

log = logging.getLogger("aotcache")

_lock = threading.Lock()
_patches: list[Patches] = []  # the routing's, while routed


def _wrapper_class() -> type | None:
    found = torch_glue.resolve("default_backend_routing")
    return None if found is None else found["wrapper"]


def enable() -> bool:
    """Routes every torch.compile that uses the default backend through aotcache, from the next compile on, with the
    same mode and options. Idempotent. False (with one WARNING) when this torch's default backend cannot be routed."""
    with _lock:
        if default_routing.enabled():
            return True
        cls = _wrapper_class()
        if cls is None:  # torch_glue warned, once
            return False
        init, call = cls.__dict__["__init__"], cls.__dict__["__call__"]

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if type(self) is cls:
                _import_backend()

        def __call__(self: Any, model_: Any, inputs_: Any, *, config_patches: dict | None = None) -> Any:
            if not routed(self):
                return call(self, model_, inputs_, config_patches=config_patches)
            try:
                from aotcache.backend import aotcache_backend
            except Exception as e:  # the boundary: what backend="inductor" would give
                _import_failed(e)
                return call(self, model_, inputs_, config_patches=config_patches)
            return aotcache_backend(model_, inputs_, options={**self.config, **(config_patches or {})})

        __init__.__wrapped__ = init  # type: ignore[attr-defined]
        __call__.__wrapped__ = call  # type: ignore[attr-defined]
        patches = Patches("aotcache.enable()").replace(cls, "__init__", __init__).replace(cls, "__call__", __call__)
        if not patches.install():  # neither stays (one WARNING): the default backend stays inductor
            return False
        default_routing.set_routed(True)
        _patches.append(patches)
        return True


def disable() -> None:
    """Gives torch.compile's default backend back to inductor (compiles from now on; frames compiled while routed
    keep their compiled code, as any backend's)."""
    with _lock:
        if not default_routing.enabled():
            return
        _patches.pop().uninstall()
        default_routing.set_routed(False)


def enabled() -> bool:
    return default_routing.enabled()


routed, routed_options = default_routing.routed, default_routing.routed_options


def _import_backend() -> None:
    try:
        from aotcache import activation

        activation.activate()  # the frame cache's hooks in before Dynamo converts a frame
    except Exception as e:  # the compile then runs on inductor
        _import_failed(e)


def _import_failed(e: BaseException) -> None:
    from aotcache import counters

    counters.warn_once(
        "enable_import", "aotcache.enable(): cannot import the aotcache backend, compiling with inductor: %r", e
    )
