"""The load of a verified graph entry, the one path both callers take: the graph pipeline on a hit
(pipeline/lookup.py) and the frame cache for each graph a served frame references (frames/hooks.py). Each caller
counts the hit and handles a failure at its own boundary (the pipeline's internal_error.<phase>, the frame cache's
frames.internal_error.load).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aotcache import _core, compiler, kernels
from aotcache.settings import Settings


def callable_of(
    entry: _core.LoadedEntry, cfg: Settings, enter: Callable[[str], None] | None = None
) -> tuple[Callable, dict[str, int]]:
    """The compiled callable of `entry` and the kernel counters of its load: the entry's kernel binaries installed
    first when they fit this machine (kernels.py), then the compiled graph loaded (compiler.load_serialized, the
    light load where `cfg` allows it). `enter(phase)` is told each phase ("kernel_installation", "load")."""
    metadata: dict[str, Any] = entry.metadata if isinstance(entry.metadata, dict) else {}
    if enter is not None:
        enter("kernel_installation")
    with kernels.installed(entry.kernels, cfg.kernels) as delta:
        if enter is not None:
            enter("load")
        fn = compiler.load_serialized(entry.payload, metadata, cfg.light_load)
    return fn, dict(delta)
