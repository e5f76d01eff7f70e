"""Graphs that read parameters and buffers through get_attr (compiled optimizer steps): the state's values stay out
of the key, its metadata and lifted position stay in; plain constants stay keyed by content. In process, no compile.
Before the fix the state was keyed by content: a warm process whose weights had moved missed (and its miss path
never updated the weights)."""

from __future__ import annotations

import torch
import torch.fx
from torch.utils._sympy.numbers import int_oo

from aotcache import _core
from aotcache.capture.graph import capture_graph, capture_inputs
from aotcache.capture.symbolic import finite_bound


def _optimizer_step_graph(param: torch.Tensor, momentum: torch.Tensor, order=("p", "q", "buf")) -> torch.fx.GraphModule:
    """The shape of Dynamo's graph for SGD with momentum on two weights: state read with get_attr, updated in place."""
    root = torch.nn.Module()
    for name in order:  # registration order = the order AOTAutograd lifts them (parameters, then buffers)
        if name == "buf":
            root.register_buffer("buf", momentum)
        else:
            root.register_parameter(name, torch.nn.Parameter(param.clone()))
    g = torch.fx.Graph()
    grad = g.placeholder("grad")
    p, q, buf = g.get_attr("p"), g.get_attr("q"), g.get_attr("buf")
    mul = g.call_method("mul_", (buf, 0.9))
    g.call_method("add_", (mul, grad))
    g.call_method("add_", (p, buf), {"alpha": -0.1})
    g.call_method("add_", (q, buf), {"alpha": -0.2})
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
    assert base != _key(_optimizer_step_graph(torch.ones(3), torch.zeros(3, dtype=torch.float64)), grad)
    assert base != _key(_optimizer_step_graph(torch.ones(4), torch.zeros(4)), [torch.ones(4)])


def test_plain_constants_stay_keyed_by_content():
    def graph(constant: torch.Tensor) -> torch.fx.GraphModule:
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(torch.add, (x, g.get_attr("c"))))
        gm = torch.fx.GraphModule({"c": constant}, g)  # FX registers every tensor attribute as a buffer
        delattr(gm, "c")
        object.__setattr__(gm, "c", constant)  # a plain attribute (set after construction): baked into the code
        return gm

    x = [torch.ones(3)]
    assert "c" not in dict(graph(torch.zeros(3)).named_buffers())
    assert _key(graph(torch.zeros(3)), x) != _key(graph(torch.ones(3)), x)


def test_range_bounds_treat_torchs_integer_infinity_as_unbounded():
    # int_oo says is_finite (it is a sympy Integer): int() of it raised inside every unbounded symbolic compile.
    assert int_oo.is_finite
    assert finite_bound(int_oo) is None and finite_bound(-int_oo) is None
    import sympy

    assert finite_bound(sympy.oo) is None and finite_bound(sympy.Integer(7)) == 7 and finite_bound(2) == 2


def test_lifted_state_sharing_a_storage_with_an_input_bypasses():
    import pytest

    from aotcache.capture.graph import check_state_aliasing
    from aotcache.errors import Bypass

    gm = _optimizer_step_graph(torch.ones(3), torch.zeros(3))
    check_state_aliasing(gm, [torch.ones(3)])  # separate storages: fine
    with pytest.raises(Bypass) as raised:
        check_state_aliasing(gm, [gm.p.detach()[:2]])  # an input viewing a lifted weight
    assert raised.value.code == "aliased_state"
