"""lookup -> load: the entry of a key, local then remote, loaded and bound to the live graph module.

A static graph's key names one entry. A symbolic graph's key names an index of guarded candidates (guarded.py):
lookup only adds the choice of the first candidate whose guards hold for the current sizes, then loads it the same
way and installs its guards into Dynamo's ShapeEnv. The remote tier holds indexes too: a local guard miss merges
the remote index in before deciding.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from aotcache import _core, compiler, counters, guarded, tensorify
from aotcache.pipeline import load, outcome
from aotcache.pipeline.request import CompileRequest, Keyed
from aotcache.storage.tiered import Read

log = logging.getLogger("aotcache")


@dataclasses.dataclass
class Found:
    """What a lookup found: the loaded callable (None on a miss), whether a compile may be stored under the key,
    and for a symbolic graph the candidates known and why each was rejected (for persist and the miss line)."""

    fn: Callable[..., Any] | None = None
    writable: bool = True
    candidates: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    rejected: list[str] = dataclasses.field(default_factory=list)
    restart: dict[str, Any] | None = None
    """A stored tensorify restart decision for this graph (tensorify.py): replayed instead of compiling."""
    restart_entry: _core.LoadedEntry | None = None


def find(req: CompileRequest, keyed: Keyed) -> Found:
    if keyed.floats is not None:
        found = _find_by_float_record(req, keyed)
        if found is not None:
            return found
    if keyed.symbolic is None:
        return _find_static(req, keyed)
    return _find_guarded(req, keyed)


def _find_static(req: CompileRequest, keyed: Keyed) -> Found:
    key_hex = keyed.key.hex
    read = _read(req, key_hex)
    if read.entry is None:
        return Found(writable=read.writable)
    return Found(_load(req, read.entry, f"key={key_hex[:16]}"), writable=True)


def _find_by_float_record(req: CompileRequest, keyed: Keyed) -> Found | None:
    """What the graph's float record says (tensorify.py): a restart to replay, or the float inputs whose values key
    its entries; None without a usable record (then the graph's key is looked up as any other)."""
    floats = keyed.floats
    record_key = floats.record_key(keyed.key)
    entry = _read(req, record_key.hex).entry
    if entry is None:
        return None
    kind = entry.metadata.get("payload_kind") if isinstance(entry.metadata, dict) else None
    try:
        if kind != tensorify.RECORD_KIND:
            raise ValueError(f"payload kind {kind!r}")
        record = tensorify.decode_record(entry.payload, floats)
    except ValueError as e:
        log.warning("float record %s is unusable, compiling: %s", record_key.hex[:16], e)
        counters.record({"errors": 1, "error.float_record": 1}, req.local)
        return None
    if "restart" in record:
        return Found(restart=record["restart"], restart_entry=entry)
    if keyed.symbolic is not None:  # values only key static graphs: a guarded graph with float guards bypasses
        return None
    key_hex = floats.values_key(keyed.key, record["values"]).hex
    read = _read(req, key_hex)
    if read.entry is None:
        return Found(writable=read.writable)
    fn = _load(req, read.entry, f"key={key_hex[:16]}", install=lambda: floats.install_values(record["values"]))
    req.index_key = record_key.hex
    return Found(fn, writable=True)


def _read(req: CompileRequest, key_hex: str) -> Read:
    """The local entry, else the remote one backfilled into the local store."""
    req.enter("lookup")
    return req.tiers.get(key_hex, on_remote=lambda: req.enter("remote"))


def _load(
    req: CompileRequest,
    entry: _core.LoadedEntry,
    label: str,
    guards: list[str] | None = None,
    table: Any = None,
    install: Callable[[], None] | None = None,
) -> Callable:
    """The callable of a verified entry, its kernel binaries installed first when they fit this machine, bound to
    the live graph module; a guarded candidate's guards are installed into Dynamo's ShapeEnv."""
    t_lookup = time.perf_counter()
    fn, delta = load.callable_of(entry, req.settings, req.enter)
    if delta:
        counters.record(delta, req.local)
    req.entry_key = entry.key
    fn = compiler.bind_to_graph(fn, req.gm)
    if guards is not None:
        req.enter("guard_installation")
        guarded.install(guards, table)
    if install is not None:  # a float-value-keyed entry: its values guarded in Dynamo's ShapeEnv
        req.enter("guard_installation")
        install()
    outcome.hit(req, entry, label, t_lookup, time.perf_counter())
    return fn


def read_index(req: CompileRequest, key_hex: str) -> list[dict[str, Any]]:
    """The candidates of the local index of `key_hex` ([] when none or unreadable)."""
    return decode_index(req, key_hex, req.tiers.get_local(key_hex).entry)


def decode_index(req: CompileRequest, key_hex: str, entry: _core.LoadedEntry | None) -> list[dict[str, Any]]:
    if entry is None:
        return []
    try:
        return guarded.decode_index(entry.payload)
    except ValueError as e:
        log.warning("guard index %s is unreadable, recompiling: %s", key_hex[:16], e)
        counters.record({"errors": 1, "error.guard_index": 1}, req.local)
        return []


def merged(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`theirs` followed by our candidates they lack (the index keeps the newest MAX_CANDIDATES)."""
    known = {c["key"] for c in theirs}
    return list(theirs) + [c for c in ours if c["key"] not in known]


def _find_guarded(req: CompileRequest, keyed: Keyed) -> Found:
    key_hex = keyed.key.hex
    req.enter("lookup")
    index = req.tiers.get_local(key_hex)
    candidates = decode_index(req, key_hex, index.entry)
    found = _choose_and_load(req, keyed, candidates)
    found.writable = index.writable
    if found.fn is not None:
        return found
    req.enter("remote")
    remote_index = req.tiers.get_remote(key_hex)  # verified, and now in the local store
    if remote_index is None:
        return found
    req.enter("lookup")
    both = merged(candidates, decode_index(req, key_hex, remote_index))
    try:  # the local index keeps its own candidates beside the remote ones
        write_index(req, keyed.key, both)
    except _core.CacheError as e:
        log.debug("cannot merge the remote guard index of %s: %s", key_hex[:16], e)
    found = _choose_and_load(req, keyed, both)
    found.writable = index.writable
    return found


def _choose_and_load(req: CompileRequest, keyed: Keyed, candidates: list[dict[str, Any]]) -> Found:
    if not candidates:
        return Found(candidates=candidates)
    req.enter("guard_selection")
    shapes = keyed.symbolic
    choice, rejected = guarded.select(candidates, shapes.table, shapes.required)
    found = Found(candidates=candidates, rejected=rejected)
    if choice is None:
        return found
    chosen = candidates[choice]
    read = _read(req, chosen["key"])  # evicted here: the remote tier may still hold it
    if read.entry is None:
        return found
    label = f"key={chosen['key'][:16]} guards={len(chosen['guards'])}"
    found.fn = _load(req, read.entry, label, guards=chosen["guards"], table=shapes.table)
    req.index_key = keyed.key.hex
    return found


def write_index(req: CompileRequest, key: _core.CacheKey, candidates: list[dict[str, Any]]) -> None:
    index_meta = {"created_unix": int(time.time()), "payload_kind": guarded.INDEX_KIND, "compile_seconds": 0.0}
    req.tiers.local.put(key, guarded.encode_index(candidates), index_meta)
