"""compile: a miss compiles through AOTAutograd + Inductor into a serializable artifact, capturing its kernels.

The function handed back is bound like a hit's: a graph that reads parameters or buffers (get_attr) gets code that
reads and updates the live tensors. Torch compiles a deep copy of the graph module, so its own callable would
update the copies (an optimizer step that never moves the weights); the payload, loaded and bound to the live
module, is exactly what a later hit runs.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from aotcache import compiler, counters, kernels, tensorify, wrapper_loading
from aotcache.errors import Bypass
from aotcache.pipeline.request import CompileRequest, Keyed

log = logging.getLogger("aotcache")


@dataclasses.dataclass
class Compiled:
    fn: Callable[..., Any]
    payload: bytes
    kernels: bytes
    seconds: float
    wrapper_sources: list[str] = dataclasses.field(default_factory=list)  # the wrappers torch loaded in the compile


def compile_for_cache(req: CompileRequest, keyed: Keyed) -> Compiled:
    """Raises Bypass (with `.compiled` set when a usable callable exists) when the result cannot be stored; any
    other exception means this path failed and the caller compiles as backend="inductor" would."""
    req.enter("compile")
    t0 = time.perf_counter()
    if keyed.floats is not None:  # in Dynamo's ShapeEnv, each float input's item() its symbol, as under inductor
        fakes = compiler.backend_fakes(req.example_inputs)
    else:
        fakes = keyed.symbolic.fakes if keyed.symbolic is not None else None
    marked = tensorify.marked() if keyed.floats is not None else frozenset()
    try:
        with kernels.capture(req.settings.kernels) as cap, wrapper_loading.recording() as wrapper_sources:
            fn, payload = compiler.compile_serializable(req.gm, req.example_inputs, req.options, symbolic_inputs=fakes)
    except Exception as e:
        if keyed.floats is not None and tensorify.is_restart(e):  # what backend="inductor" raises for this graph
            raise tensorify.Restart(keyed.floats.decision(marked), e, time.perf_counter() - t0) from None
        if isinstance(e, Bypass):
            _drop_copies_bound_to_state(req, e)
        raise
    seconds = time.perf_counter() - t0
    bundle, why_not = cap.bundle()
    if why_not is not None:
        log.info("kernels not carried in the entry: %s", why_not)
        counters.record({"kernels.not_captured": 1, f"kernels.not_captured.{why_not}": 1}, req.local)
    if compiler.graph_state(req.gm):
        fn = compiler.bind_to_graph(compiler.load_serialized(payload), req.gm)
    return Compiled(fn, payload, bundle, seconds, wrapper_sources)


def _drop_copies_bound_to_state(req: CompileRequest, b: Bypass) -> None:
    if getattr(b, "compiled", None) is not None and compiler.graph_state(req.gm):
        b.compiled = None  # bound to torch's copies of the state: compile it plainly instead


def compile_plain(req: CompileRequest) -> Callable[..., Any]:
    """What backend="inductor" does with the same graph: the path of every bypass and fallback. Its exceptions are
    the user's (torch would raise them too)."""
    return compiler.compile_plain(req.gm, req.example_inputs, req.options)
