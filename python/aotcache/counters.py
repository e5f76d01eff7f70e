"""Counters: this process's in memory (`aotcache.stats()`), every cache directory's on disk (`aotcache stats`).

Counter names are shared by both: hits, misses, bypasses, errors, bypass.<reason>, miss.<component>, error.<kind>,
bytes_read, bytes_written, compile_us (time spent compiling on misses), saved_us (compile time the hits did not
spend), load_us (time spent loading hits), wait.<name> and wait_us (compile once, storage/single_flight.py),
remote.<name> (the remote tier, storage/remote.py).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("aotcache")

_lock = threading.Lock()
_counters: collections.Counter[str] = collections.Counter()
_warned: set[str] = set()
_batches = threading.local()  # .stack: the open batches of this thread (one per compile in flight)


def warn_once(kind: str, message: str, *args: Any) -> None:
    """Logs a WARNING the first time this process meets an error `kind`, DEBUG after: a full disk or a read-only
    directory is reported once, not at every compile (each occurrence is still counted)."""
    with _lock:
        first = kind not in _warned
        _warned.add(kind)
    log.log(logging.WARNING if first else logging.DEBUG, message + ("" if first else " (repeated)"), *args)


class Batch:
    """The counters of one compile, written together when its `batch()` block ends; `store` may be set late (the
    store is opened inside the block)."""

    def __init__(self, store: Any | None) -> None:
        self.store = store
        self.delta: collections.Counter[str] = collections.Counter()


@contextlib.contextmanager
def batch(store: Any | None = None) -> Iterator[Batch]:
    """Collects every `record()` of this thread until the block ends, then writes the sum once: one update of the
    process's counters and one of the store's (a compile touches the counters file once, whatever its path). The
    write happens even when the block raises, and never raises itself."""
    current = Batch(store)
    stack = _batches.__dict__.setdefault("stack", [])
    stack.append(current)
    try:
        yield current
    finally:
        stack.pop()
        if current.delta:
            try:
                _write(dict(current.delta), current.store)
            except Exception as e:  # counting must never fail a compile
                warn_once("stats_failed", "could not update the statistics (%s: %s)", type(e).__name__, e)


def record(delta: dict[str, int], store: Any | None, defer: bool = False) -> None:
    """Adds `delta` to this process's counters and, when a store is open, to its directory's; inside `batch()`, to
    the batch instead (written when it ends). `defer`: the directory's share waits (`flush`) until DEFER_S after the
    first deferred delta, or the process's exit: a warm start that serves many frames touches the counters file
    once, not once per frame (the process's counters are updated at once either way)."""
    stack = getattr(_batches, "stack", None)
    if stack:
        stack[-1].delta.update(delta)
        return
    if defer and store is not None:
        global _pending_since
        now = time.monotonic()
        with _lock:
            _counters.update(delta)
            _pending.setdefault(id(store), (store, collections.Counter()))[1].update(delta)
            if _pending_since is None:
                _pending_since = now
            due = now - _pending_since >= DEFER_S
        if due:
            flush()
        return
    _write(delta, store)


DEFER_S = 1.0
_PID = os.getpid()
_pending: dict[int, tuple[Any, collections.Counter[str]]] = {}  # id(store) -> (store, its deferred delta)
_pending_since: float | None = None


def flush() -> None:
    """Writes the deferred deltas to their directories (also at the process's exit). Never raises."""
    global _pending_since
    with _lock:
        pending = list(_pending.values()) if os.getpid() == _PID else []  # a forked child: its parent writes them
        _pending.clear()
        _pending_since = None
    for store, delta in pending:
        _write_store(dict(delta), store)


atexit.register(flush)


def _write(delta: dict[str, int], store: Any | None) -> None:
    with _lock:
        _counters.update(delta)
    if store is not None:
        _write_store(delta, store)


def _write_store(delta: dict[str, int], store: Any) -> None:
    try:
        store.add_counters(delta)
    except Exception as e:  # stats must never fail a compile
        with _lock:
            _counters["errors"] += 1
            _counters["error.stats_write"] += 1
        warn_once("stats_write", "could not update statistics in %s: %s", getattr(store, "dir", "?"), e)


def snapshot() -> dict[str, Any]:
    """This process's counters as a dict: the four base counters always present, reasons grouped."""
    with _lock:
        c = dict(_counters)
    out: dict[str, Any] = {name: c.pop(name, 0) for name in ("hits", "misses", "bypasses", "errors")}
    out["bypass_reasons"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("bypass.")}
    # A miss counts under every key component that differs from the closest cached entry of the same graph, or
    # under new_graph when no entry of the graph is stored.
    out["miss_reasons"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("miss.")}
    out["error_kinds"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("error.")}
    # Compiles that did not use the cache directory because another user could have written it and entries are
    # unsigned (storage/trust.py).
    out["untrusted"] = c.get("untrusted", 0)
    out["bytes_read"] = c.get("bytes_read", 0)
    out["bytes_written"] = c.get("bytes_written", 0)
    out["compile_seconds"] = c.get("compile_us", 0) / 1e6
    out["saved_seconds"] = c.get("saved_us", 0) / 1e6
    out["load_seconds"] = c.get("load_us", 0) / 1e6
    # Compile once (storage/single_flight.py): processes that waited for another's compile, waits that ended in a hit,
    # waits that gave up (AOTCACHE_COMPILE_WAIT), and the time spent waiting.
    out["wait"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("wait.")}
    out["wait"]["seconds"] = c.get("wait_us", 0) / 1e6
    # The remote tier (storage/remote.py): hits, misses, errors, rejected_signature, puts, bytes, ... by name.
    out["remote"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("remote.")}
    # Inductor's vector-ISA probe (isa_probe.py): check_build calls answered from the machine's memo, or probed.
    out["isa_probe"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("isa_probe.")}
    # Kernel binaries in entries (kernels.py): files installed on hits, already present, bundles of another
    # machine, install failures, and compiles whose kernels were not carried (by reason).
    out["kernels"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("kernels.")}
    # Faults of aotcache's own code, by the pipeline phase they hit (pipeline/outcome.py): the compile went on
    # without the cache for that step, and the user's call got what backend="inductor" gives.
    out["internal_errors"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("internal_error.")}
    # The frame cache (frames/): frames served without tracing, looked up but traced (by reason), recorded, not
    # frame-cacheable (by reason), and its own faults (Dynamo traced the frame).
    out["frames"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("frames.")}
    # Symbolic floats (tensorify.py): Inductor's tensorify restarts recorded by a compile, replayed from a record
    # instead of compiling, and restarts that could not be recorded. None of them is a hit, miss or bypass: Dynamo
    # counts no graph for an attempt it restarts.
    out["tensorify"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("tensorify.")}
    # Wrapper modules a hit ran from the entry's compiled code (wrapper_code.py), or compiled from their text.
    out["wrapper_code"] = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("wrapper_code.")}
    # Features this torch failed the check of (torch_glue/): off for the process, one WARNING each.
    out["torch_internals_off"] = sorted(k.split(".", 2)[2] for k in c if k.startswith("torch_internals.off."))
    return out


def reset() -> None:
    with _lock:
        _counters.clear()
        _warned.clear()
