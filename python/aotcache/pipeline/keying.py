"""capture -> check -> key: the graph, its inputs, the global state, configs and environment as a cache key.

Raises `Bypass` (with its reason) for a graph that cannot be cached soundly; anything else it raises is an internal
error of the phase recorded in the request.
"""

from __future__ import annotations

from aotcache import _core, counters, global_state, isa_probe, tensorify
from aotcache.capture import distributed_tensor, symbolic
from aotcache.capture import graph as capture
from aotcache.errors import Bypass
from aotcache.pipeline.request import CompileRequest, Keyed, Symbolic


def derive_key(req: CompileRequest) -> Keyed:
    req.enter("capture")
    fakes = symbolic.symbolic_placeholders(req.gm, req.example_inputs)
    table = symbolic.build_table(fakes) if fakes is not None else None
    floats = tensorify.context(table)
    dtensors = distributed_tensor.context(req.gm, req.example_inputs)
    graph = capture.capture_graph(req.gm, table, dtensors)
    inputs = capture.capture_inputs(req.example_inputs, fakes, table, dtensors)
    capture.check_state_aliasing(req.gm, req.example_inputs)
    shapes = None
    if table:
        shapes = Symbolic(fakes, table, symbolic.required_ranges(req.example_inputs, fakes, table))

    req.enter("check")
    verdict = _core.check_graph(graph)
    if verdict is not None:
        raise Bypass(*verdict)

    req.enter("key")
    cfg = req.settings
    # The first environment() of a process runs Inductor's vector-ISA probe: answered from the machine's memo.
    with isa_probe.remembered(cfg.cache_dir, cfg.isa_probe_memo and req.tiers is not None) as probe:
        environment = global_state.environment()
    if probe.counters():
        counters.record(probe.counters(), req.local)
    config = global_state.config_state(req.options)
    if floats is not None:
        config["tensorify"] = floats.rows
    if dtensors is not None:
        req.mesh_coordinate = dtensors.coordinate
        config["dtensor"] = [f"rank coordinate keyed: {dtensors.coordinate}", *dtensors.rows]
    key = _core.compute_key(
        graph,
        inputs,
        global_state.autograd_state(),
        config,
        environment,
        global_state.user_state(cfg.salt),
    )
    return Keyed(key, graph, inputs, shapes, floats)
