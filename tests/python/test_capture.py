"""The capture layer and the bindings, without compiling: IR contents, key stability, fail-closed bypasses."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx

from aotcache import _core
from aotcache.capture import capture_graph, capture_inputs
from aotcache.errors import Bypass


def _key(gm: torch.fx.GraphModule, inputs) -> _core.CacheKey:
    return _core.compute_key(capture_graph(gm), capture_inputs(inputs), {}, {}, {}, {})


def _traced(fn) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(fn)


def test_renamed_variables_keep_the_key():
    def f(x, y):
        a = torch.relu(x)
        return a + y

    def g(first, second):
        renamed = torch.relu(first)
        return renamed + second

    inputs = [torch.randn(2, 3), torch.randn(2, 3)]
    assert _key(_traced(f), inputs).hex == _key(_traced(g), inputs).hex


def test_argument_types_and_values_change_the_key():
    inputs = [torch.randn(2, 3)]
    keys = {
        _key(_traced(lambda x: x + 1), inputs).hex,
        _key(_traced(lambda x: x + 1.0), inputs).hex,
        _key(_traced(lambda x: x + 2), inputs).hex,
        _key(_traced(lambda x: x.to(torch.float64)), inputs).hex,
        _key(_traced(lambda x: x.to(torch.float16)), inputs).hex,
        _key(_traced(lambda x: x[:, 1:]), inputs).hex,
        _key(_traced(lambda x: x[..., 1:]), inputs).hex,
    }
    assert len(keys) == 7


def test_parameter_values_do_not_change_the_key_metadata_does():
    x = torch.randn(2, 3)
    w1, w2 = torch.nn.Parameter(torch.randn(3, 3)), torch.nn.Parameter(torch.randn(3, 3))
    gm = _traced(lambda x, w: x @ w)
    assert _key(gm, [x, w1]).hex == _key(gm, [x, w2]).hex
    assert _key(gm, [x, w1]).hex != _key(gm, [x, torch.randn(3, 3)]).hex  # Parameter vs Tensor
    assert _key(gm, [x, w1]).hex != _key(gm, [x.t().contiguous().t(), w1]).hex  # strides


def test_constant_tensors_are_keyed_by_content():
    class M(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.register_buffer("c", c)

        def forward(self, x):
            return x + self.c

    x = [torch.randn(3)]
    a = _key(torch.fx.symbolic_trace(M(torch.ones(3))), x).hex
    b = _key(torch.fx.symbolic_trace(M(torch.ones(3))), x).hex
    c = _key(torch.fx.symbolic_trace(M(torch.zeros(3))), x).hex
    assert a == b != c


def test_targets_are_classified():
    gm = _traced(lambda x: operator.getitem(torch.nn.functional.relu(x).view(-1), 0))
    g = capture_graph(gm)
    assert len(g) == 5
    assert _core.check_graph(g) is None
    manifest = dict(
        (n, s) for n, _, s in _core.compute_key(g, capture_inputs([torch.randn(4)]), {}, {}, {}, {}).manifest
    )
    assert "operator.getitem" in manifest["graph"] and "view" in manifest["graph"]


def test_unknown_python_function_is_reported_by_the_rules():
    def helper(x):
        return x * 3

    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(helper, (x,))
    g.output(y)
    code, message = _core.check_graph(capture_graph(torch.fx.GraphModule(torch.nn.Module(), g)))
    assert code == "python_function"
    assert "helper" in message and "node helper" in message


def test_unencodable_argument_bypasses_naming_the_node():
    class Opaque:
        pass

    gm = _traced(lambda x: torch.add(x, 1))
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    add.args = (add.args[0], Opaque())  # no recompile: the graph is read, never run
    with pytest.raises(Bypass) as info:
        capture_graph(gm)
    assert info.value.code == "unencodable_value"
    assert "node add" in info.value.message and "Opaque" in info.value.message


def test_huge_integer_bypasses():
    gm = _traced(lambda x: x + 2**70)
    with pytest.raises(Bypass) as info:
        capture_graph(gm)
    assert info.value.code == "unencodable_value"


def test_tensor_subclass_input_bypasses():
    class MyTensor(torch.Tensor):
        pass

    with pytest.raises(Bypass) as info:
        capture_inputs([torch.randn(2).as_subclass(MyTensor)])
    assert info.value.code == "tensor_subclass"


def test_store_round_trip_and_corruption(tmp_path):
    store = _core.LocalStore.open(str(tmp_path))
    key = _key(_traced(lambda x: x.sin()), [torch.randn(2)])
    assert store.get(key.hex) is None
    store.put(key, b"payload\x00bytes", {"compile_seconds": 1.5})
    entry = store.get(key.hex)
    assert entry.payload == b"payload\x00bytes"
    assert entry.metadata == {"compile_seconds": 1.5}
    assert [name for name, _, _ in entry.manifest] == [
        "format",
        "graph",
        "inputs",
        "autograd_state",
        "config",
        "environment",
        "user",
    ]
    path = store.entry_path(key.hex)
    with open(path, "r+b") as f:
        f.seek(60)
        f.write(b"\xff")
    with pytest.raises(_core.CorruptEntryError):
        store.get(key.hex)
    with pytest.raises(_core.CacheError):
        store.get("../../etc/passwd")


def _dynamo_graph(fn, *inputs) -> torch.fx.GraphModule:
    """The GraphModule Dynamo hands a backend for `fn(*inputs)`."""
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=record, fullgraph=True)(*inputs)
    return graphs[0]


def test_user_annotations_are_keyed_debug_meta_is_not():
    import torch.fx.traceback as fx_traceback

    def plain(x):
        return x.sin() + 1

    def annotated(x, stage=0):
        with fx_traceback.annotate({"pp_stage": stage}):
            return x.sin() + 1

    x = torch.randn(3)
    k_plain = _key(_dynamo_graph(plain, x), [x]).hex
    k_stage0 = _key(_dynamo_graph(annotated, x), [x]).hex
    k_stage1 = _key(_dynamo_graph(lambda t: annotated(t, stage=1), x), [x]).hex
    assert len({k_plain, k_stage0, k_stage1}) == 3
    # Stack traces, module stacks and example values are in Dynamo's meta, yet a second capture keys the same.
    assert _key(_dynamo_graph(plain, x), [x]).hex == k_plain


def test_unknown_node_meta_bypasses():
    gm = _traced(lambda x: x.cos())
    next(n for n in gm.graph.nodes if n.op == "call_method").meta["some_future_key"] = 1
    with pytest.raises(Bypass) as info:
        capture_graph(gm)
    assert info.value.code == "unknown_node_meta" and "some_future_key" in info.value.message


def test_checkpoint_policy_enum_in_meta_is_keyed():
    from torch.utils.checkpoint import CheckpointPolicy

    def tagged(policy):
        gm = _traced(lambda x: x.cos())
        next(n for n in gm.graph.nodes if n.op == "call_method").meta["recompute"] = policy
        return _key(gm, [torch.randn(2)]).hex

    assert tagged(CheckpointPolicy.MUST_SAVE) != tagged(CheckpointPolicy.PREFER_RECOMPUTE)
    assert tagged(CheckpointPolicy.MUST_SAVE) == tagged(CheckpointPolicy.MUST_SAVE)


def test_environment_override(monkeypatch):
    from aotcache import global_state

    base = global_state.environment()
    assert {"torch", "python", "vec_isa", "cxx", "cxx_version", "gpus", "triton"} <= base.keys()
    monkeypatch.setenv(global_state.ENVIRONMENT_OVERRIDE_VAR, '{"torch": "9.9.9", "vec_isa": "avx2"}')
    changed = global_state.environment()
    assert changed["torch"] == "9.9.9" and changed["vec_isa"] == "avx2" and changed["python"] == base["python"]
    monkeypatch.setenv(global_state.ENVIRONMENT_OVERRIDE_VAR, "[1]")
    with pytest.raises(Bypass) as info:
        global_state.environment()
    assert info.value.code == "bad_environment_override"


def test_list_arguments_from_dynamo_are_keyed_not_bypassed():
    """Dynamo stores list arguments as immutable_list: they must encode like lists (they used to bypass)."""

    def make(values):
        return lambda x: x + torch.tensor(values)

    x = torch.randn(3)
    a = _key(_dynamo_graph(make([1.0, 2.0, 3.0]), x), [x]).hex
    b = _key(_dynamo_graph(make([1.0, 2.0, 4.0]), x), [x]).hex
    assert a != b
    assert a == _key(_dynamo_graph(make([1.0, 2.0, 3.0]), x), [x]).hex
