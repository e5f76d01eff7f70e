"""Whether torch.compile's default backend compiles through aotcache now (`aotcache.enable()`), and the options a
routed wrapper compiles with: the state default_backend.py sets and the frame cache reads (a frame compiled by the
routed default backend is an aotcache frame). Below both: it imports neither.
"""

from __future__ import annotations

from typing import Any

_routed = [False]  # set by default_backend.enable() / disable()


def set_routed(on: bool) -> None:
    _routed[0] = on


def enabled() -> bool:
    return _routed[0]


def routed(compiler_fn: Any) -> bool:
    """Whether `compiler_fn` is a default-backend wrapper that compiles through aotcache now."""
    if not _routed[0]:
        return False
    from aotcache.torch_glue import compile_entry

    return type(compiler_fn) is getattr(compile_entry, "TorchCompileInductorWrapper", None) and (
        getattr(compiler_fn, "name", None) is None
    )


def routed_options(compiler_fn: Any) -> dict[str, Any] | None:
    """The Inductor options a routed wrapper compiles with; None when `compiler_fn` is not one."""
    if not routed(compiler_fn):
        return None
    config = getattr(compiler_fn, "config", None)
    return dict(config) if isinstance(config, dict) else None
