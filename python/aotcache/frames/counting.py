"""The frame cache's counting: a delta in the process and the frame's directory, an internal error counted and warned
once per (phase, kind), a frame's name in the log."""

from __future__ import annotations

import logging
import types
from typing import Any

from aotcache import (
    counters,
)

log = logging.getLogger("aotcache")


_warned: set[tuple[str, str]] = set()


def frame_name(code: types.CodeType) -> str:
    return code.co_qualname


def count(delta: dict[str, int], frame: Any, store: Any = None, defer: bool = False) -> None:
    """Counts `delta` in the process and the frame's directory; `defer` for a served frame's counts (a warm start
    serves many frames: the directory's counters file is written once for them, counters.flush)."""
    try:
        local = store if store is not None else (frame.tiers.local if frame is not None else None)
        counters.record(delta, local, defer=defer)
    except Exception:
        log.debug("cannot count %s", delta, exc_info=True)


def internal_error(phase: str, error: BaseException, frame: Any) -> None:
    count({"frames.internal_errors": 1, f"frames.internal_error.{phase}": 1}, frame)
    kind = (phase, type(error).__name__)
    if kind not in _warned:
        _warned.add(kind)
        log.warning("frame cache %s failed, Dynamo traces the frame: %r", phase, error, exc_info=True)
