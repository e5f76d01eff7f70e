"""The capture layer and the bindings, without compiling: IR contents, key stability, fail-closed bypasses."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx

from aotcache import _core
from aotcache.capture.graph import capture_graph, capture_inputs
from aotcache.errors import Bypass

pytestmark = pytest.mark.frames_off_too  # runs again with the frame cache off (make test)


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


def test_buffers_are_lifted_state_keyed_by_metadata_not_content():
    # AOTAutograd lifts a graph module's buffers into inputs of the compiled code (bound to the live ones on every
    # call), so their values are not in the code; plain-attribute constants are keyed by content (test_lifted_state).
    class M(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.register_buffer("c", c)

        def forward(self, x):
            return x + self.c

    x = [torch.randn(3)]
    a = _key(torch.fx.symbolic_trace(M(torch.ones(3))), x).hex
    b = _key(torch.fx.symbolic_trace(M(torch.zeros(3))), x).hex
    c = _key(torch.fx.symbolic_trace(M(torch.zeros(3, dtype=torch.float64))), x).hex
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


# --- inputs sharing a storage (alias groups) ---------------------------------------------------------------------


def _alias(inputs) -> list:
    """(group, storage bytes, view base) of each captured input."""
    return [(m.alias_group, m.alias_storage_nbytes, m.alias_base) for m in capture_inputs(inputs)]


def test_overlapping_and_disjoint_views_of_one_base_share_a_group():
    base = torch.zeros(10)
    view_base = ([10], [1], 0)
    assert _alias([base[0:6], base[4:10]]) == [(0, 40, view_base), (0, 40, view_base)]  # overlapping
    # Disjoint views still share the storage: AOTAutograd decides on overlap from the sizes, strides and offsets.
    assert _alias([base[0:5], base[5:10]]) == [(0, 40, view_base), (0, 40, view_base)]
    # A tensor and its view: the tensor is no view (no base); the view's base is the tensor.
    assert _alias([base, base.view(2, 5)]) == [(0, 40, None), (0, 40, view_base)]
    # Views of a 2-D base carry the base's own shape (what AOTAutograd's synthetic base is).
    base_2d = torch.zeros(2, 5)
    flat = base_2d.view(-1)
    assert _alias([flat[0:6], flat[4:10]])[0] == (0, 40, ([2, 5], [5, 1], 0))


def test_groups_are_numbered_by_first_appearance_and_singletons_are_no_group():
    a, b, c = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    captured = capture_inputs([c, a[1:], b, a[:2], 3, c[0:1]])
    assert captured[4] == 3  # a scalar input: no group, no metadata
    assert [m.alias_group for k, m in enumerate(captured) if k != 4] == [0, 1, -1, 1, 0]
    # Distinct tensors share nothing.
    assert _alias([a, b, c]) == [(-1, 0, None)] * 3


def test_the_same_tensor_twice_is_one_group():
    x = torch.randn(3)
    assert _alias([x, x]) == [(0, 12, None), (0, 12, None)]


def test_zero_size_storages_are_never_shared():
    empty = torch.zeros(0)
    assert _alias([empty, empty.view(0, 3), empty]) == [(-1, 0, None)] * 3
    # A zero-size view of a storage with bytes does share it (AOTAutograd groups by storage).
    x = torch.zeros(4)
    assert [g for g, _, _ in _alias([x[0:0], x])] == [0, 0]


def test_a_view_of_a_parameter_shares_its_storage():
    p = torch.nn.Parameter(torch.zeros(10))
    metas = capture_inputs([p, p.detach()[2:5]])
    assert [m.alias_group for m in metas] == [0, 0]


def test_storage_sharing_changes_the_key_not_the_numbering_or_the_values():
    def f(a, b):
        a.add_(1)
        return a + b

    gm = _traced(f)
    base, other = torch.zeros(10), torch.zeros(10)
    shared = _core.compute_key(capture_graph(gm), capture_inputs([base[0:6], base[4:10]]), {}, {}, {}, {})
    separate = _core.compute_key(capture_graph(gm), capture_inputs([base[0:6], other[4:10]]), {}, {}, {}, {})
    assert shared.hex != separate.hex
    assert _core.differing_components(shared.manifest, separate.manifest) == ["inputs"]
    summary = dict((name, summary) for name, _, summary in shared.manifest)["inputs"]
    assert summary.startswith("2 inputs (2 sharing storage):") and "(alias 0)" in summary
    # Other data, another base of the same shape: the same sharing, the same key.
    again = torch.randn(10)
    assert _key(gm, [again[0:6], again[4:10]]).hex == shared.hex
    # A bigger storage or a base of another shape: AOTAutograd's synthetic base differs, so does the key.
    big = torch.zeros(12)
    assert _key(gm, [big[0:6], big[4:10]]).hex != shared.hex
    flat = torch.zeros(2, 5).view(-1)
    assert _key(gm, [flat[0:6], flat[4:10]]).hex != shared.hex


def test_dynamo_hands_the_backend_the_real_aliased_inputs():
    """Dynamo passes real tensors (not fakes) with their storages and bases: the groups are seen."""
    seen = []

    def record(gm, example_inputs):
        seen.append(capture_inputs(example_inputs))
        return gm.forward

    def f(a, b):
        a.add_(1)
        return a + b

    torch._dynamo.reset()
    base = torch.zeros(10)
    torch.compile(f, backend=record, fullgraph=True)(base[0:6], base[4:10])
    assert [m.alias_group for m in seen[0]] == [0, 0]
    assert seen[0][0].alias_base == ([10], [1], 0)


def test_symbolic_inputs_sharing_a_storage_bypass():
    from aotcache.capture import symbolic

    seen = []

    def record(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    def f(a, b):
        a.add_(1)
        return a + b

    torch._dynamo.reset()
    base = torch.zeros(10)
    torch.compile(f, backend=record, fullgraph=True, dynamic=True)(base[0:6], base[4:10])
    gm, example_inputs = seen[0]
    fakes = symbolic.symbolic_placeholders(gm, example_inputs)
    assert fakes is not None
    with pytest.raises(Bypass) as e:
        capture_inputs(example_inputs, fakes, symbolic.build_table(fakes))
    assert e.value.code == "dynamic_shapes"
    assert "shares its storage" in e.value.message


def test_complex_constants_are_keyed_bit_exactly_and_apart_from_tuples():
    x = [torch.randn(3, dtype=torch.complex64)]
    keys = {
        _key(_traced(lambda t: t * (1 + 2j)), x).hex,
        _key(_traced(lambda t: t * (1 + 2.0000001j)), x).hex,
        _key(_traced(lambda t: t * (2 + 1j)), x).hex,
        _key(_traced(lambda t: t * complex(-0.0, 2.0)), x).hex,
        _key(_traced(lambda t: t * complex(0.0, 2.0)), x).hex,
    }
    assert len(keys) == 5
    assert _key(_traced(lambda t: t * (1 + 2j)), x).hex == _key(_traced(lambda u: u * (1 + 2j)), x).hex


def test_a_config_serializer_that_would_import_the_compiler_is_hidden_only_where_it_changes_nothing():
    """torch 2.15's Inductor config serializes `inductor_choices_class` by importing `torch._inductor.choices` (the
    compiler); with the field None that import is all it does, so the key path hides it (a warm process must not
    import the compiler); with a class set, it runs and its result is keyed. Simulated on a config-like module."""
    import types

    from aotcache import global_state

    calls: list[object] = []

    def _serialize_inductor_choices(config):
        calls.append(config.get("inductor_choices_class"))
        if config.get("inductor_choices_class") is not None:
            config["inductor_choices_class"] = "choices-key"

    module = types.ModuleType("fake_inductor_config")
    module._cache_config_serializer = _serialize_inductor_choices
    module.inductor_choices_class = None

    def save_config_portable(ignore_private_configs=True):
        config = {"inductor_choices_class": module.inductor_choices_class, "x": 1}
        serializer = getattr(module, "_cache_config_serializer", None)
        if serializer is not None:
            serializer(config)
        return config

    module.save_config_portable = save_config_portable
    assert global_state._portable_fields(module) == {"inductor_choices_class": None, "x": 1}
    assert calls == [] and module._cache_config_serializer is _serialize_inductor_choices
    module.inductor_choices_class = type("Choices", (), {})
    assert global_state._portable_fields(module) == {"inductor_choices_class": "choices-key", "x": 1}
    assert len(calls) == 1


def _with_float_value(value) -> torch.fx.GraphModule:
    """`x * 3.0` and `3.0 * 2` returned, the second node's example value `value` (a SymFloat), as torch 2.15's
    tensorify retrace leaves it after specializing a float it could not turn into tensor arithmetic."""

    def f(x):
        return x * 3.0, operator.mul(3.0, 2)

    gm = _traced(f)
    node = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is operator.mul)
    node.meta["example_value"] = value
    return gm


def test_a_constant_symbolic_float_in_a_static_graph_is_keyed_by_its_value():
    import sympy
    from torch.fx.experimental.sym_node import SymNode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    # What the retrace's node holds: a SymFloat over no symbol (ShapeEnv's own constructors return a plain float).
    six, five = (torch.SymFloat(SymNode(sympy.Float(v), env, float, hint=v)) for v in (6.0, 5.0))
    assert isinstance(six, torch.SymFloat) and not six.node.expr.free_symbols
    inputs = [torch.randn(2, 3)]
    assert _key(_with_float_value(six), inputs).hex != _key(_with_float_value(five), inputs).hex
    assert _key(_with_float_value(six), inputs).hex == _key(_with_float_value(six), inputs).hex
    # A float over a symbol no input of this (static) graph carries cannot be keyed: it bypasses, naming the node.
    symbol = env.create_unbacked_symfloat()
    with pytest.raises(Bypass) as info:
        _key(_with_float_value(symbol * 2), inputs)
    assert info.value.code == "dynamic_shapes" and "symbolic float of no graph input" in info.value.message
