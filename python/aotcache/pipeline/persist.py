"""persist: after a compile, the entry (with its captured graph and kernels) into the tiers, and for a symbolic graph
its guarded candidate and the graph's index. A failure to store is counted and the compile is used anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import torch

from aotcache import _core, counters, tensorify, wrapper_loading
from aotcache.capture import symbolic
from aotcache.errors import Bypass
from aotcache.pipeline import outcome
from aotcache.pipeline.compiling import Compiled
from aotcache.pipeline.lookup import Found, decode_index, merged, read_index, write_index
from aotcache.pipeline.request import CompileRequest, Keyed

log = logging.getLogger("aotcache")

_EXPLAIN_CANDIDATES = 3


def persist(req: CompileRequest, keyed: Keyed, compiled: Compiled, found: Found) -> None:
    req.enter("persist")
    if keyed.symbolic is None:
        if keyed.floats is not None:
            guarded: set[int] = set()
            try:  # a compile generic in its float inputs, or guarded on some of their values
                symbolic.compile_guards(keyed.floats.table, guarded, keyed.floats.keyed_guards)
            except Bypass as b:
                outcome.bypass(req, b)
                return
            if guarded:
                _persist_float_values(req, keyed, compiled, sorted(guarded))
                return
        _persist_static(req, keyed, compiled, found.writable)
    else:
        _persist_guarded(req, keyed, compiled, found)


def persist_restart(req: CompileRequest, keyed: Keyed, restart: tensorify.Restart) -> None:
    """A compile that raised tensorify's restart: its decision, in the graph's float record, is what a later process
    replays instead of compiling (tensorify.py). Not recordable (a float this graph's context does not name was
    marked): counted, and the restart goes on unrecorded. Neither is a hit, miss or bypass: Dynamo counts no graph
    for an attempt it restarts."""
    req.enter("persist")
    if restart.decision is None:
        counters.record({"tensorify.unrecorded": 1}, req.local)
        log.info("tensorify restart not recorded: it marked a float no input of the graph carries")
        return
    key = keyed.floats.record_key(keyed.key)
    _put_record(req, key, tensorify.encode_record(restart=restart.decision), restart.seconds, keyed)
    counters.record({"tensorify.recorded": 1, "compile_us": int(restart.seconds * 1e6)}, req.local)
    log.info(
        "tensorify restart recorded key=%s compile=%s marking %s%s",
        key.hex[:16],
        outcome.ms(restart.seconds),
        restart.decision["specialize"],
        " and the floats of no input" if restart.decision["others"] else "",
    )


def _persist_float_values(req: CompileRequest, keyed: Keyed, compiled: Compiled, floats: list[int]) -> None:
    """A compile that guarded on float inputs' values: stored under the key plus those values, and the graph's float
    record says which floats a lookup must add to the key (tensorify.py)."""
    floats_ctx = keyed.floats
    key = floats_ctx.values_key(keyed.key, floats)
    record_key = floats_ctx.record_key(keyed.key)
    written = None
    try:
        written = req.tiers.put(
            key,
            compiled.payload,
            _metadata(compiled.seconds, wrapper_sources=compiled.wrapper_sources),
            _serialized_graph(keyed),
            compiled.kernels,
        )
        req.entry_key = key.hex
        written += _put_record(req, record_key, tensorify.encode_record(values=floats), 0.0, keyed) or 0
        req.index_key = record_key.hex
    except _core.CacheError as e:
        outcome.store_failed(req, key.hex, e)
    names = ", ".join(f"f{i}" for i in floats)
    outcome.miss(req, key.hex, ["new_graph"], compiled.seconds, written, f" keyed by the values of {names}")


def _put_record(req: CompileRequest, key: _core.CacheKey, payload: bytes, seconds: float, keyed: Keyed) -> int | None:
    try:
        return req.tiers.put(key, payload, _metadata(seconds, tensorify.RECORD_KIND), _serialized_graph(keyed))
    except _core.CacheError as e:
        outcome.store_failed(req, key.hex, e)
        return None


def _metadata(
    seconds: float, kind: str = "inductor_aot_artifact", wrapper_sources: Sequence[str] = ()
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "compile_seconds": seconds,
        "created_unix": int(time.time()),
        "producer": f"aotcache {_core.__version__}",
        "torch": str(torch.__version__),
        "payload_kind": kind,
    }
    if kind != "inductor_aot_artifact":
        return metadata
    bindings = wrapper_loading.recorded_bindings()
    if bindings is not None:
        metadata["wrapper_bindings"] = bindings
        code = wrapper_loading.recorded_code(list(wrapper_sources), bindings)
        if code is not None:
            metadata["wrapper_code"] = code
    return metadata


def _persist_static(req: CompileRequest, keyed: Keyed, compiled: Compiled, writable: bool) -> None:
    key = keyed.key
    try:  # diagnostics must never fail a compile
        causes, detail = _explain_miss(req.tiers.local, key)
    except Exception:
        log.debug("cannot explain the miss of %s", key.hex[:16], exc_info=True)
        causes, detail = ["unexplained"], ""
    written = None
    if writable:
        try:
            written = req.tiers.put(
                key,
                compiled.payload,
                _metadata(compiled.seconds, wrapper_sources=compiled.wrapper_sources),
                _serialized_graph(keyed),
                compiled.kernels,
            )
            req.entry_key = key.hex
        except _core.CacheError as e:
            outcome.store_failed(req, key.hex, e)
    outcome.miss(req, key.hex, causes, compiled.seconds, written, f" bytes={len(compiled.payload)}{detail}")


def _persist_guarded(req: CompileRequest, keyed: Keyed, compiled: Compiled, found: Found) -> None:
    shapes = keyed.symbolic
    try:
        keyed_float_guards = keyed.floats.keyed_guards if keyed.floats is not None else frozenset()
        guards = symbolic.compile_guards(shapes.table, keyed_float_guards=keyed_float_guards)
    except Bypass as b:  # compiled, but its domain cannot be written down: use it, do not store it
        outcome.bypass(req, b)
        return
    key = keyed.key
    candidate_key = _core.with_guards(key, guards)
    tiers = req.tiers
    written = None
    try:
        if not found.writable:  # the index under this key belongs to another writer (newer format, other keys)
            raise _core.CacheError("the guard index of this graph is not writable by this process")
        written = tiers.put(
            candidate_key,
            compiled.payload,
            _metadata(compiled.seconds, wrapper_sources=compiled.wrapper_sources),
            _serialized_graph(keyed),
            compiled.kernels,
        )
        req.entry_key = candidate_key.hex
        req.index_key = key.hex
        # Read-modify-write of the index (under the compile lock of this graph on this machine): the newest local
        # and remote candidates, plus ours. Writers on two machines at once may drop one candidate from the remote
        # index (a later guard miss re-adds it); never a wrong hit.
        known = read_index(req, key.hex)
        remote_index = tiers.get_remote(key.hex)
        if remote_index is not None:
            known = merged(known, decode_index(req, key.hex, remote_index))
        candidates = [c for c in merged(found.candidates, known) if c["key"] != candidate_key.hex]
        candidates.append({"key": candidate_key.hex, "guards": guards, "ranges": symbolic.symbol_ranges(shapes.table)})
        write_index(req, key, candidates)
        tiers.publish(key.hex)
    except _core.CacheError as e:
        outcome.store_failed(req, candidate_key.hex, e)
    cause = "guards" if found.candidates else "new_graph"
    why = "no candidate's guards hold" if found.candidates else "no stored entry for this graph"
    if found.rejected:
        why += ": " + "; ".join(found.rejected[:3])
    outcome.miss(req, candidate_key.hex, [cause], compiled.seconds, written, f" guards={len(guards)} ({why})")


def _serialized_graph(keyed: Keyed) -> bytes:
    """The captured graph in the graph format, stored for `aotcache show`; b"" when it cannot be serialized."""
    try:
        return _core.serialize_graph(keyed.graph, keyed.inputs)
    except _core.CacheError as e:  # the entry is useful without its graph: never fail the store for it
        log.debug("cannot serialize the graph: %s", e)
        return b""


def _explain_miss(store: _core.LocalStore, key: _core.CacheKey) -> tuple[list[str], str]:
    """(components that caused the miss, a log suffix). Compares the key with the newest stored entries of the same
    graph and names the components that differ from the closest one; `new_graph` when the graph was never stored."""
    graph_digest = next(digest for name, digest, _ in key.manifest if name == "graph")
    try:
        candidates = [k for k in store.keys_for_graph(graph_digest) if k != key.hex][:_EXPLAIN_CANDIDATES]
        best: tuple[list[str], _core.LoadedEntry] | None = None
        for candidate in candidates:
            try:
                entry = store.peek(candidate)  # explaining a miss must not refresh the other entries' LRU age
            except _core.CacheError:
                continue
            if entry is None:
                continue
            differ = _core.differing_components(key.manifest, entry.manifest)
            if best is None or len(differ) < len(best[0]):
                best = (differ, entry)
    except _core.CacheError as e:
        log.debug("cannot explain the miss of %s: %s", key.hex[:16], e)
        return ["unexplained"], ""
    if best is None:
        return ["new_graph"], " (no stored entry for this graph)"
    differ, other = best
    ours = {name: summary for name, _, summary in key.manifest}
    theirs = {name: summary for name, _, summary in other.manifest}
    parts = []
    for c in differ:
        fields = []
        if c in key.component_values and c in other.component_values:
            try:  # field by field: "inductor.epilogue_fusion: True -> False" (cached -> now)
                fields = _core.explain_component(other.component_values[c], key.component_values[c], 5)
            except _core.CacheError:
                fields = []
        parts.append(
            f"{c}: " + ", ".join(fields) if fields else f"{c}: now [{ours.get(c, '')}] cached [{theirs.get(c, '')}]"
        )
    details = "; ".join(parts)
    return differ, f" (differs from a cached entry of the same graph in {', '.join(differ)}: {details})"
