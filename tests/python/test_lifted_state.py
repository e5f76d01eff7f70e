"""Graphs that read parameters and buffers through get_attr (compiled optimizer steps): the state's values stay out
of the key, its metadata and lifted position stay in; plain constants stay keyed by content. In process, no compile.
Before the fix the state was keyed by content: a warm process whose weights had moved missed (and its miss path
never updated the weights)."""

from __future__ import annotations

import torch
import torch.fx
from torch.utils._sympy.numbers import int_oo

from aotcache import _core
from aotcache.capture import capture_graph, capture_inputs
from aotcache.symbolic import finite_bound


def _optimizer_step_graph(param: torch.Tensor, momentum: torch.Tensor, order=("p", "buf")) -> torch.fx.GraphModule:
    """The shape of Dynamo's graph for SGD with momentum: state read with get_attr, updated in place."""
    root = torch.nn.Module()
    for name in order:  # registration order = the order AOTAutograd lifts them
        if name == "p":
            root.register_parameter("p", torch.nn.Parameter(param))
        else:
            root.register_buffer("buf", momentum)
    g = torch.fx.Graph()
    grad = g.placeholder("grad")
    p, buf = g.get_attr("p"), g.get_attr("buf")
    mul = g.call_method("mul_", (buf, 0.9))
    g.call_method("add_", (mul, grad))
    g.call_method("add_", (p, buf), {"alpha": -0.1})
    g.output(())
    return torch.fx.GraphModule(root, g)


def _key(gm: torch.fx.GraphModule, inputs) -> str:
    return _core.compute_key(capture_graph(gm), capture_inputs(inputs), {}, {}, {}, {}).hex


def test_state_values_do_not_change_the_key():
    grad = [torch.ones(3)]
    before = _key(_optimizer_step_graph(torch.ones(3), torch.zeros(3)), grad)
    moved = _key(_optimizer_step_graph(torch.full((3,), 0.7), torch.full((3,), 0.3)), grad)
    assert before == moved


def test_state_metadata_and_lifted_order_change_the_key():
    grad = [torch.ones(3)]
    base = _key(_optimizer_step_graph(torch.ones(3), torch.zeros(3)), grad)
    assert base != _key(_optimizer_step_graph(torch.ones(3, dtype=torch.float64), torch.zeros(3)), grad)
    # The compiled code takes the lifted state in registration order: another order is other code.
    assert base != _key(_optimizer_step_graph(torch.ones(3), torch.zeros(3), order=("buf", "p")), grad)


def test_plain_constants_stay_keyed_by_content():
    def graph(constant: torch.Tensor) -> torch.fx.GraphModule:
        root = torch.nn.Module()
        root.c = constant  # an attribute, neither parameter nor buffer: baked into the compiled code
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(torch.add, (x, g.get_attr("c"))))
        return torch.fx.GraphModule(root, g)

    x = [torch.ones(3)]
    assert _key(graph(torch.zeros(3)), x) != _key(graph(torch.ones(3)), x)


def test_range_bounds_treat_torchs_integer_infinity_as_unbounded():
    # int_oo says is_finite (it is a sympy Integer): int() of it raised inside every unbounded symbolic compile.
    assert int_oo.is_finite
    assert finite_bound(int_oo) is None and finite_bound(-int_oo) is None
    import sympy

    assert finite_bound(sympy.oo) is None and finite_bound(sympy.Integer(7)) == 7 and finite_bound(2) == 2
