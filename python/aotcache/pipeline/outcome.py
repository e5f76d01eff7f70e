"""The one place that counts and logs how a compile went: hit, miss, bypass, internal_error.

Counters go into the compile's batch (counters.batch) and reach memory and the cache directory once, when the
compile ends. Log lines: one INFO line per outcome; an internal error is a WARNING with the exception type the
first time a (phase, type) is met in this process, DEBUG after, with the traceback at DEBUG.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from aotcache import _core, counters
from aotcache.errors import Bypass
from aotcache.pipeline.request import CompileRequest

log = logging.getLogger("aotcache")

_warned_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}ms"


def internal_error(req: CompileRequest | None, error: BaseException) -> None:
    """A fault of aotcache's own code in `req.phase` (`request` before the request existed): counted
    `internal_error.<phase>`; the compile goes on without the cache for that step. Never raises."""
    phase = req.phase if req is not None else "request"
    try:
        kind = (phase, type(error).__name__)
        with _warned_lock:
            first = kind not in _warned
            _warned.add(kind)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "internal error in phase %s (%s: %s); compiling without the cache for this step",
            phase,
            type(error).__name__,
            str(error)[:200],
        )
        log.debug("internal error in phase %s", phase, exc_info=error)
        counters.record({"errors": 1, f"internal_error.{phase}": 1}, req.local if req is not None else None)
    except Exception:  # the counters or the log themselves failed: nothing more can be said
        pass


def bypass(req: CompileRequest, b: Bypass, compile_s: float | None = None) -> None:
    counters.record({"bypasses": 1, f"bypass.{b.code}": 1}, req.local)
    timing = f" compile={ms(compile_s)}" if compile_s is not None else ""
    log.info("bypass reason=%s%s: %s", b.code, timing, b.message)


def hit(req: CompileRequest, entry: _core.LoadedEntry, label: str, t_lookup: float, t_load: float) -> None:
    """Counts a hit and logs its one line; `t_lookup`: entry read, `t_load`: artifact loaded."""
    metadata = entry.metadata if isinstance(entry.metadata, dict) else {}
    saved = float(metadata.get("compile_seconds", 0.0))
    counters.record(
        {
            "hits": 1,
            "bytes_read": len(entry.payload),
            "saved_us": int(saved * 1e6),
            "load_us": int((t_load - t_lookup) * 1e6),
        },
        req.local,
    )
    t = req.timings
    log.info(
        "hit %s key_time=%s lookup=%s load=%s total=%s",
        label,
        ms(t.key - t.start),
        ms(t_lookup - t.key),
        ms(t_load - t_lookup),
        ms(t_load - t.start),
    )


def miss(
    req: CompileRequest, key_hex: str, causes: list[str], compile_s: float, written: int | None, detail: str
) -> None:
    """A compile that was a miss: counted under each cause (the key components that differ from the closest
    cached entry, `new_graph`, or `guards`); `written` bytes stored (None: not stored)."""
    delta: dict[str, Any] = {"misses": 1, "compile_us": int(compile_s * 1e6)}
    for cause in causes:
        delta[f"miss.{cause}"] = 1
    if written:
        delta["bytes_written"] = written
    counters.record(delta, req.local)
    t = req.timings
    log.info(
        "miss key=%s key_time=%s compile=%s total=%s%s",
        key_hex[:16],
        ms(t.key - t.start),
        ms(compile_s),
        ms(time.perf_counter() - t.start),
        detail,
    )


def store_failed(req: CompileRequest, key_hex: str, error: Exception) -> None:
    counters.warn_once("store_write", "cannot store entry %s (the compile is used anyway): %s", key_hex[:16], error)
    counters.record({"errors": 1, "error.store_write": 1}, req.local)


def reset() -> None:
    """Forgets which internal errors were reported (tests)."""
    with _warned_lock:
        _warned.clear()
