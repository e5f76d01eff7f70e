"""The `aotcache` torch.compile backend: capture -> check -> key -> lookup -> load, or compile -> store.

A cache problem never fails the user's compile: every fault is counted, logged, and falls back to compiling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from aotcache import (
    _core,
    capture,
    compiler,
    counters,
    global_state,
    guarded,
    isa_probe,
    kernels,
    remote,
    settings,
    single_flight,
    symbolic,
)
from aotcache.errors import Bypass

log = logging.getLogger("aotcache")

_stores_lock = threading.Lock()
_stores: dict[str, _core.LocalStore] = {}
_unavailable_dirs: set[str] = set()


def _open_store(cache_dir: str) -> _core.LocalStore | None:
    """The store for `cache_dir`, opened once per process; None (reported once) when it cannot be used."""
    with _stores_lock:
        if cache_dir in _stores:
            return _stores[cache_dir]
        try:
            store = _core.LocalStore.open(cache_dir)
        except _core.CacheError as e:
            if cache_dir not in _unavailable_dirs:
                _unavailable_dirs.add(cache_dir)
                log.warning("cache directory %s is unusable, compiling without cache: %s", cache_dir, e)
            return None
        _stores[cache_dir] = store
        return store


def _inductor_options(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if mode is not None and mode != "default":
        opts.update(torch._inductor.list_mode_options(mode))
    opts.update(options or {})
    return opts


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}ms"


def aotcache_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compiles `gm` like backend="inductor", through the cache. Registered as torch.compile(backend="aotcache")."""
    t_start = time.perf_counter()
    cfg = settings.current()
    opts = _inductor_options(mode, options)
    if not cfg.enabled:
        return _compile_bypassed(gm, example_inputs, opts, Bypass("disabled", "AOTCACHE_DISABLE is set"), None)
    store = _open_store(cfg.cache_dir)
    if store is not None:
        store.set_max_size(cfg.max_size)
    if opts.get("freezing", torch._inductor.config.freezing):
        freezing = Bypass("freezing", "Inductor freezing bakes parameter values into the compiled code")
        return _compile_bypassed(gm, example_inputs, opts, freezing, store)
    try:
        fakes = symbolic.symbolic_placeholders(gm, example_inputs)
        table = symbolic.build_table(fakes) if fakes is not None else None
        graph = capture.capture_graph(gm, table)
        inputs = capture.capture_inputs(example_inputs, fakes, table)
        verdict = _core.check_graph(graph)
        if verdict is not None:
            raise Bypass(*verdict)
        # The first environment() of a process runs Inductor's vector-ISA probe: answered from the machine's memo.
        with isa_probe.remembered(cfg.cache_dir, cfg.isa_probe_memo and store is not None) as probe:
            environment = global_state.environment()
        if probe.counters():
            counters.record(probe.counters(), store)
        key = _core.compute_key(
            graph,
            inputs,
            global_state.autograd_state(),
            global_state.config_state(opts),
            environment,
            global_state.user_state(cfg.salt),
        )
    except Bypass as b:
        return _compile_bypassed(gm, example_inputs, opts, b, store)
    except Exception as e:  # a bug of aotcache's capture must not break the user's compile
        log.warning("internal error while computing the key, compiling without cache", exc_info=True)
        counters.record({"errors": 1, "error.internal": 1}, store)
        return _compile_bypassed(gm, example_inputs, opts, Bypass("internal_error", repr(e)), store)
    if store is None:
        counters.record({"errors": 1, "error.store_unavailable": 1}, None)
        return _compile_bypassed(gm, example_inputs, opts, Bypass("store_unavailable", cfg.cache_dir), None)
    t_key = time.perf_counter()

    if table:
        return _symbolic_lookup_or_compile(
            gm, example_inputs, fakes, table, opts, store, key, cfg, (t_start, t_key), (graph, inputs)
        )
    fn, writable = _lookup(store, key, t_start, t_key)
    if fn is not None:
        return _adapt_to_graph(fn, gm)
    # A miss: compile once. When another process is compiling this key, wait for its entry (single_flight.py).
    claim = single_flight.claim(store, key.hex, cfg, until_entry=True) if writable else single_flight.Claim()
    try:
        if claim.look_again:
            fn, writable = _lookup(store, key, t_start, t_key)
            if fn is not None:
                if claim.waited:
                    counters.record({"wait.hits": 1}, store)
                return _adapt_to_graph(fn, gm)
        return _compile_and_store(gm, example_inputs, opts, store, key, writable, t_start, t_key, (graph, inputs))
    finally:
        claim.release()


def _lookup(store: _core.LocalStore, key: _core.CacheKey, t_start: float, t_key: float) -> tuple[Callable | None, bool]:
    """The local store, then the remote tier: (the loaded callable or None, whether a compile may be stored)."""
    fn, writable = _try_hit(store, key, t_start, t_key)
    if fn is None and writable and remote.fetch(store, key.hex):  # a remote hit was verified into the local store
        fn, writable = _try_hit(store, key, t_start, t_key)
    return fn, writable


def _try_hit(
    store: _core.LocalStore, key: _core.CacheKey, t_start: float, t_key: float
) -> tuple[Callable | None, bool]:
    """(the loaded callable or None, whether a new compile may be written under this key)."""
    try:
        entry = store.get(key.hex)
    except _core.IncompatibleEntryError as e:
        # Written by a newer aotcache sharing the directory: leave it to its owner, do not overwrite it.
        log.warning("entry %s is not readable by this version, compiling without storing: %s", key.hex[:16], e)
        counters.record({"errors": 1, "error.incompatible_entry": 1}, store)
        return None, False
    except _core.CorruptEntryError as e:
        # The store has moved it to quarantine/ (counted there as `corrupt`).
        log.warning("entry %s is corrupt, recompiling: %s", key.hex[:16], e)
        counters.record({"errors": 1, "error.corrupt_entry": 1}, store)
        return None, True
    except _core.CacheError as e:
        counters.warn_once("store_read", "cannot read entry %s, recompiling: %s", key.hex[:16], e)
        counters.record({"errors": 1, "error.store_read": 1}, store)
        return None, True
    if entry is None:
        return None, True
    t_lookup = time.perf_counter()
    try:
        fn = _load_entry(store, entry)
    except Exception as e:  # a payload torch cannot load is as good as corrupt
        log.warning("entry %s could not be loaded, recompiling: %r", key.hex[:16], e)
        counters.record({"errors": 1, "error.load_failed": 1}, store)
        _remove_quietly(store, key.hex)
        return None, True
    _record_hit(store, entry, f"key={key.hex[:16]}", (t_start, t_key, t_lookup, time.perf_counter()))
    return fn, True


def _load_entry(store: _core.LocalStore, entry: _core.LoadedEntry) -> Callable:
    """The callable of a verified entry, with its kernel binaries installed first when they fit this machine."""
    with kernels.installed(entry.kernels, settings.current().kernels) as delta:
        fn = compiler.load_serialized(entry.payload)
    if delta:
        counters.record(delta, store)
    return fn


def _compile_capturing_kernels(store, gm, example_inputs, opts, **kwargs) -> tuple[Callable, bytes, bytes]:
    """compiler.compile_serializable, plus the kernel bundle of what it built (b"" when none is carried)."""
    with kernels.capture(settings.current().kernels) as cap:
        fn, payload = compiler.compile_serializable(gm, example_inputs, opts, **kwargs)
    bundle, why_not = cap.bundle()
    if why_not is not None:
        log.info("kernels not carried in the entry: %s", why_not)
        counters.record({"kernels.not_captured": 1, f"kernels.not_captured.{why_not}": 1}, store)
    return fn, payload, bundle


def _record_hit(store, entry, label: str, times: tuple[float, float, float, float]) -> None:
    """Counts a hit and logs its one line; `times` are (start, key computed, entry read, artifact loaded)."""
    t_start, t_key, t_lookup, t_load = times
    saved = float(entry.metadata.get("compile_seconds", 0.0)) if isinstance(entry.metadata, dict) else 0.0
    counters.record(
        {
            "hits": 1,
            "bytes_read": len(entry.payload),
            "saved_us": int(saved * 1e6),
            "load_us": int((t_load - t_lookup) * 1e6),
        },
        store,
    )
    log.info(
        "hit %s key_time=%s lookup=%s load=%s total=%s",
        label,
        _ms(t_key - t_start),
        _ms(t_lookup - t_key),
        _ms(t_load - t_lookup),
        _ms(t_load - t_start),
    )


def _adapt_to_graph(fn: Callable, gm: torch.fx.GraphModule) -> Callable:
    """A loaded artifact is the inner compiled function; give it the calling convention of `gm` as compile_fx did:
    - it takes the graph module's parameters and buffers first, as AOTAutograd lifted them at compile time (a graph
      handed over with nn modules in it): pass the live ones, so updated weights are used;
    - it returns a sequence even when the graph returns a single value (graphs not captured by Dynamo): unwrap."""
    state = [
        *dict(gm.named_parameters(remove_duplicate=False)).values(),
        *dict(gm.named_buffers(remove_duplicate=False)).values(),
    ]
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    single = not isinstance(output.args[0], (tuple, list))
    if not state and not single:
        return fn

    def adapted(*args: Any) -> Any:
        out = fn(*state, *args)
        return out[0] if single else out

    return adapted


def _compile_and_store(
    gm, example_inputs, opts, store, key, writable: bool, t_start: float, t_key: float, captured=None
) -> Callable:
    """A miss: compile, then write the entry (with the `captured` (graph, inputs), serialized) when `writable`."""
    t_compile = time.perf_counter()
    try:
        fn, payload, bundle = _compile_capturing_kernels(store, gm, example_inputs, opts)
    except Bypass as b:
        compiled = getattr(b, "compiled", None)
        if compiled is None:
            return _compile_bypassed(gm, example_inputs, opts, b, store)
        counters.record({"bypasses": 1, f"bypass.{b.code}": 1}, store)
        log.info("bypass reason=%s: %s", b.code, b.message)
        return compiled
    except Exception:
        # Compiling through the serializable path failed: try the plain path once; its error is the user's.
        log.warning("serializable compile failed, compiling without cache", exc_info=True)
        counters.record({"errors": 1, "error.compile_failed": 1}, store)
        return _compile_bypassed(gm, example_inputs, opts, Bypass("compile_failed", "see the warning above"), store)
    compile_s = time.perf_counter() - t_compile
    metadata = {
        "compile_seconds": compile_s,
        "created_unix": int(time.time()),
        "producer": f"aotcache {_core.__version__}",
        "torch": str(torch.__version__),
        "payload_kind": "inductor_aot_artifact",
    }
    delta = {"misses": 1, "compile_us": int(compile_s * 1e6)}
    try:  # diagnostics must never fail a compile
        explanation = _explain_miss(store, key)
    except Exception:
        log.debug("cannot explain the miss of %s", key.hex[:16], exc_info=True)
        explanation = (["unexplained"], "")
    for component in explanation[0]:
        delta[f"miss.{component}"] = 1
    t_put = time.perf_counter()
    if writable:
        try:
            delta["bytes_written"] = store.put(key, payload, metadata, _serialized_graph(captured), bundle)
            remote.publish(store, key.hex)
        except _core.CacheError as e:
            counters.warn_once("store_write", "cannot store entry %s (the compile is used anyway): %s", key.hex[:16], e)
            delta.update({"errors": 1, "error.store_write": 1})
    t_end = time.perf_counter()
    counters.record(delta, store)
    log.info(
        "miss key=%s key_time=%s compile=%s store=%s bytes=%d total=%s%s",
        key.hex[:16],
        _ms(t_key - t_start),
        _ms(compile_s),
        _ms(t_end - t_put),
        len(payload),
        _ms(t_end - t_start),
        explanation[1],
    )
    return fn


_EXPLAIN_CANDIDATES = 3


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


def _serialized_graph(captured) -> bytes:
    """The captured graph in the graph format, stored for `aotcache show`; b"" when it cannot be serialized."""
    if captured is None:
        return b""
    try:
        return _core.serialize_graph(*captured)
    except _core.CacheError as e:  # the entry is useful without its graph: never fail the store for it
        log.debug("cannot serialize the graph: %s", e)
        return b""


def _symbolic_lookup_or_compile(gm, example_inputs, fakes, table, opts, store, key, cfg, times, captured) -> Callable:
    """A symbolic graph: the key holds an index of guarded candidates; the first whose guards hold is a hit, none
    is a guard miss, and the new compile is added beside the others. The remote tier holds the index and the
    candidates too: a local guard miss merges the remote index in before deciding."""
    t_start, t_key = times
    required = symbolic.required_ranges(example_inputs, fakes, table)
    fn, candidates, rejected = _symbolic_lookup(store, key, gm, table, required, times, with_remote=True)
    if fn is not None:
        return fn
    claim = single_flight.claim(store, key.hex, cfg, until_entry=False)
    try:
        if claim.look_again:  # another process compiled this graph meanwhile: maybe for these sizes
            fn, candidates, rejected = _symbolic_lookup(store, key, gm, table, required, times, with_remote=True)
            if fn is not None:
                if claim.waited:
                    counters.record({"wait.hits": 1}, store)
                return fn
        return _symbolic_compile_and_store(
            gm, example_inputs, fakes, table, opts, store, key, candidates, rejected, times, captured
        )
    finally:
        claim.release()


def _read_index(store: _core.LocalStore, key_hex: str) -> list[dict[str, Any]]:
    try:
        index_entry = store.get(key_hex)
        return guarded.decode_index(index_entry.payload) if index_entry is not None else []
    except (_core.CacheError, ValueError) as e:
        log.warning("guard index %s is unreadable, recompiling: %s", key_hex[:16], e)
        counters.record({"errors": 1, "error.guard_index": 1}, store)
        return []


def _merged(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`theirs` followed by our candidates they lack (the index keeps the newest MAX_CANDIDATES)."""
    known = {c["key"] for c in theirs}
    return list(theirs) + [c for c in ours if c["key"] not in known]


def _write_index(store: _core.LocalStore, key: _core.CacheKey, candidates: list[dict[str, Any]]) -> None:
    index_meta = {"created_unix": int(time.time()), "payload_kind": guarded.INDEX_KIND, "compile_seconds": 0.0}
    store.put(key, guarded.encode_index(candidates), index_meta)


def _symbolic_lookup(store, key, gm, table, required, times, *, with_remote: bool):
    """(the loaded hit or None, the candidates known, why they were rejected). Local index first; on a guard miss,
    the remote index is fetched and merged into the local one, and a remote candidate that matches is fetched."""
    candidates = _read_index(store, key.hex)
    rejected: list[str] = []
    if candidates:
        choice, rejected = guarded.select(candidates, table, required)
        if choice is not None:
            chosen = candidates[choice]["key"]
            if with_remote and not store.contains(chosen):  # evicted here: the remote tier may still hold it
                remote.fetch(store, chosen)
            fn = _load_candidate(store, candidates[choice], gm, table, times)
            if fn is not None:
                return fn, candidates, rejected
    if not with_remote or not remote.fetch(store, key.hex):  # the remote index, verified, now in the local store
        return None, candidates, rejected
    merged = _merged(candidates, _read_index(store, key.hex))
    try:
        _write_index(store, key, merged)  # the local index keeps its own candidates beside the remote ones
    except _core.CacheError as e:
        log.debug("cannot merge the remote guard index of %s: %s", key.hex[:16], e)
    choice, rejected = guarded.select(merged, table, required)
    if choice is None:
        return None, merged, rejected
    chosen = merged[choice]["key"]
    if not store.contains(chosen) and not remote.fetch(store, chosen):
        return None, merged, rejected
    return _load_candidate(store, merged[choice], gm, table, times), merged, rejected


def _symbolic_compile_and_store(
    gm, example_inputs, fakes, table, opts, store, key, candidates, rejected, times, captured
) -> Callable:
    t_start, _ = times
    t_compile = time.perf_counter()
    try:
        fn, payload, bundle = _compile_capturing_kernels(store, gm, example_inputs, opts, symbolic_inputs=fakes)
    except Bypass as b:
        compiled = getattr(b, "compiled", None)
        if compiled is None:
            return _compile_bypassed(gm, example_inputs, opts, b, store)
        counters.record({"bypasses": 1, f"bypass.{b.code}": 1}, store)
        log.info("bypass reason=%s: %s", b.code, b.message)
        return compiled
    compile_s = time.perf_counter() - t_compile
    try:
        guards = symbolic.compile_guards(table)
    except Bypass as b:  # compiled, but its domain cannot be written down: use it, do not store it
        counters.record({"bypasses": 1, f"bypass.{b.code}": 1}, store)
        log.info("bypass reason=%s: %s", b.code, b.message)
        return fn
    candidate_key = _core.with_guards(key, guards)
    cause = "guards" if candidates else "new_graph"
    delta = {"misses": 1, f"miss.{cause}": 1, "compile_us": int(compile_s * 1e6)}
    metadata = {
        "compile_seconds": compile_s,
        "created_unix": int(time.time()),
        "producer": f"aotcache {_core.__version__}",
        "torch": str(torch.__version__),
        "payload_kind": "inductor_aot_artifact",
    }
    try:
        delta["bytes_written"] = store.put(candidate_key, payload, metadata, _serialized_graph(captured), bundle)
        remote.publish(store, candidate_key.hex)
        # Read-modify-write of the index (under the compile lock of this graph on this machine): the newest local
        # and remote candidates, plus ours. Writers on two machines at once may drop one candidate from the remote
        # index (a later guard miss re-adds it); never a wrong hit.
        known = _read_index(store, key.hex)
        if remote.fetch(store, key.hex):
            known = _merged(known, _read_index(store, key.hex))
        candidates = [c for c in _merged(candidates, known) if c["key"] != candidate_key.hex]
        candidates.append({"key": candidate_key.hex, "guards": guards, "ranges": symbolic.symbol_ranges(table)})
        _write_index(store, key, candidates)
        remote.publish(store, key.hex)
    except _core.CacheError as e:
        counters.warn_once(
            "store_write", "cannot store entry %s (the compile is used anyway): %s", candidate_key.hex[:16], e
        )
        delta.update({"errors": 1, "error.store_write": 1})
    counters.record(delta, store)
    log.info(
        "miss key=%s guards=%d compile=%s total=%s (%s%s)",
        candidate_key.hex[:16],
        len(guards),
        _ms(compile_s),
        _ms(time.perf_counter() - t_start),
        "no candidate's guards hold" if candidates[:-1] else "no stored entry for this graph",
        ": " + "; ".join(rejected[:3]) if rejected else "",
    )
    return fn


def _load_candidate(store, candidate: dict[str, Any], gm, table, times: tuple[float, float]) -> Callable | None:
    t_start, t_key = times
    try:
        entry = store.get(candidate["key"])
    except _core.CacheError as e:
        log.warning("cannot read entry %s, recompiling: %s", candidate["key"][:16], e)
        counters.record({"errors": 1, "error.store_read": 1}, store)
        return None
    if entry is None:  # evicted since the index was written
        return None
    t_lookup = time.perf_counter()
    try:
        fn = _load_entry(store, entry)
        guarded.install(candidate["guards"], table)
    except Exception as e:
        log.warning("entry %s could not be loaded, recompiling: %r", candidate["key"][:16], e)
        counters.record({"errors": 1, "error.load_failed": 1}, store)
        return None
    label = f"key={candidate['key'][:16]} guards={len(candidate['guards'])}"
    _record_hit(store, entry, label, (t_start, t_key, t_lookup, time.perf_counter()))
    return _adapt_to_graph(fn, gm)


def _compile_bypassed(gm, example_inputs, opts, bypass: Bypass, store) -> Callable:
    t0 = time.perf_counter()
    counters.record({"bypasses": 1, f"bypass.{bypass.code}": 1}, store)
    fn = compiler.compile_plain(gm, example_inputs, opts)
    log.info("bypass reason=%s compile=%s: %s", bypass.code, _ms(time.perf_counter() - t0), bypass.message)
    return fn


def _remove_quietly(store: _core.LocalStore, key_hex: str) -> None:
    try:
        store.remove(key_hex)
    except _core.CacheError as e:
        log.warning("cannot remove entry %s: %s", key_hex[:16], e)
