"""The `aotcache` torch.compile backend: one compile request through the pipeline, behind ONE failure boundary.

    capture -> check -> key -> lookup -> load            (pipeline/keying.py, pipeline/lookup.py)
                              or compile -> persist      (pipeline/compiling.py, pipeline/persist.py)

The boundary, as torch's own try_load / save split it:
- capture, check, key: a `Bypass` compiles as backend="inductor" would, counted `bypass.<reason>`; any other
  exception does the same, counted `internal_error.<phase>`;
- lookup, remote, guard selection, load, kernel and guard installation: any exception is counted
  `internal_error.<phase>` and the graph is compiled (and stored) as on a miss;
- compile: the cache's serializable compile failing falls back to the plain compile; what that raises is the
  user's (torch would raise it too);
- persist: any exception is counted and the compiled function is returned.
Nothing of aotcache's own escapes: the user's call gets what backend="inductor" gives, and the reason is counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from aotcache import compiler, counters, settings, tensorify
from aotcache.errors import Bypass
from aotcache.pipeline import compiling, keying, lookup, outcome, persist
from aotcache.pipeline.request import CompileRequest
from aotcache.storage import opened, single_flight
from aotcache.torch_glue import inductor as inductor_glue

log = logging.getLogger("aotcache")


class _TorchRaised(Exception):
    """Carries an exception of the plain compile (the user's) through the boundary, which re-raises the original."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def aotcache_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compiles `gm` like backend="inductor", through the cache. Registered as torch.compile(backend="aotcache")."""
    opts = compiler.inductor_options(mode, options)  # an unknown mode raises here, as it does under backend="inductor"
    t0 = time.perf_counter()
    try:
        return _boundary(gm, example_inputs, opts)
    finally:
        from aotcache.pipeline import tags

        tags.add_backend_seconds(time.perf_counter() - t0)


def _boundary(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], opts: dict[str, Any]) -> Callable[..., Any]:
    req: CompileRequest | None = None
    try:
        with counters.batch() as batch:
            req = CompileRequest(gm, example_inputs, opts, settings.current())
            fn = _run(req, batch)
            if req.entry_key is not None and req.settings.frames:
                _tag(fn, req)
            return fn
    except _TorchRaised as raised:
        raise raised.error from None
    except Exception as e:  # a fault in the boundary's own handling: the last resort
        outcome.internal_error(req, e)
        return compiler.compile_plain(gm, example_inputs, opts)  # what it raises is the user's


def _tag(fn: Callable[..., Any], req: CompileRequest) -> None:
    """Tells the frame cache which entry `fn` is the artifact of. Only a callable that is the artifact itself, or
    its single-output unwrapping, can be rebuilt from the entry alone: one bound to lifted state is not tagged, and
    its frame is not frame-cached."""
    if compiler.graph_state(req.gm):
        return
    try:
        from aotcache.pipeline import tags

        tags.tag(
            fn,
            req.entry_key,
            single=compiler.returns_single(req.gm),
            input_sources=_input_sources(req.gm),
            index_key=req.index_key,
            mesh_coordinate=req.mesh_coordinate,
        )
    except Exception as e:  # the frame is not recorded; the graph is served as always
        outcome.internal_error(req, e)


def _input_sources(gm: torch.fx.GraphModule) -> tuple | None:
    """Where Dynamo took each graph input from (its sources; Dynamo drops them from the graph after the compile)."""
    sources = []
    for node in gm.graph.find_nodes(op="placeholder"):
        source = getattr(node.meta.get("grapharg"), "source", None)
        if source is None:
            return None
        sources.append(source)
    return tuple(sources)


def _run(req: CompileRequest, batch: counters.Batch) -> Callable[..., Any]:
    cfg = req.settings
    if not cfg.enabled:
        return _bypassed(req, Bypass("disabled", "AOTCACHE_DISABLE is set"))
    req.enter("open_store")
    req.tiers = opened.tiers(cfg)
    batch.store = req.local
    if req.options.get("freezing", inductor_glue.inductor_config.freezing):
        return _bypassed(req, Bypass("freezing", "Inductor freezing bakes parameter values into the compiled code"))
    try:
        keyed = keying.derive_key(req)
    except Bypass as b:
        return _bypassed(req, b)
    except Exception as e:
        outcome.internal_error(req, e)
        return _plain(req)
    req.timings.key = time.perf_counter()
    if req.tiers is None:
        counters.record({"errors": 1, "error.store_unavailable": 1}, None)
        return _bypassed(req, Bypass("store_unavailable", cfg.cache_dir))

    found = _find(req, keyed)
    if found.restart is not None:
        _replay_restart(req, keyed, found)
    if found.fn is not None:
        return found.fn
    # A miss: compile once. When another process is compiling this key, wait for its entry (storage/single_flight.py).
    req.enter("wait")
    static = keyed.symbolic is None and keyed.floats is None  # the entry of the key ends a wait
    claim = single_flight.Claim()
    if found.writable:
        try:
            claim = single_flight.claim(req.local, keyed.key.hex, cfg, until_entry=static)
        except Exception as e:  # compile once is an optimization: without it, this process compiles
            outcome.internal_error(req, e)
    try:
        if claim.look_again:  # another process compiled this graph meanwhile (for a symbolic one: maybe these sizes)
            again = _find(req, keyed)
            if again.restart is not None:
                _replay_restart(req, keyed, again)
            if again.fn is not None:
                if claim.waited:
                    counters.record({"wait.hits": 1}, req.local)
                return again.fn
            found = again
        return _compile_and_persist(req, keyed, found)
    finally:
        claim.release()


def _find(req: CompileRequest, keyed) -> lookup.Found:
    try:
        return lookup.find(req, keyed)
    except Exception as e:  # torch's try_load: a failed lookup or load is a miss
        outcome.internal_error(req, e)
        return lookup.Found()


def _replay_restart(req: CompileRequest, keyed, found: lookup.Found) -> None:
    """Raises the restart a stored decision says this graph's compile raises (tensorify.py), its floats marked."""
    req.enter("tensorify_replay")
    error = keyed.floats.replay(found.restart)
    saved = found.restart_entry.metadata.get("compile_seconds", 0.0) if found.restart_entry is not None else 0.0
    counters.record({"tensorify.replayed": 1, "saved_us": int(float(saved) * 1e6)}, req.local)
    log.info("tensorify restart replayed, marking %s", found.restart["specialize"])
    raise _TorchRaised(error)


def _compile_and_persist(req: CompileRequest, keyed, found: lookup.Found) -> Callable[..., Any]:
    try:
        compiled = compiling.compile_for_cache(req, keyed)
    except tensorify.Restart as r:  # Dynamo traces the frame again with the floats marked, as under inductor
        try:
            persist.persist_restart(req, keyed, r)
        except Exception as e:
            outcome.internal_error(req, e)
        raise _TorchRaised(r.error) from None
    except Bypass as b:
        if getattr(b, "compiled", None) is None:
            return _bypassed(req, b)
        outcome.bypass(req, b)
        return b.compiled
    except Exception as e:
        # The cache's compile path failed: compile as backend="inductor" would; what that raises is the user's.
        outcome.internal_error(req, e)
        return _plain(req)
    try:
        persist.persist(req, keyed, compiled, found)
    except Exception as e:  # torch's save: a failure to store never costs the compile
        outcome.internal_error(req, e)
    return compiled.fn


def _bypassed(req: CompileRequest, b: Bypass) -> Callable[..., Any]:
    t0 = time.perf_counter()
    fn = _plain(req)
    outcome.bypass(req, b, time.perf_counter() - t0)
    return fn


def _plain(req: CompileRequest) -> Callable[..., Any]:
    try:
        return compiling.compile_plain(req)
    except Exception as e:
        raise _TorchRaised(e) from e
