"""distributed_tensor.py in one process, over torch's fake process group (world of 4, this process rank 1): the key
text of meshes, DTensor inputs and placements, when the rank's coordinate is keyed, DTensor's dispatch state, patched
DTensor methods, and the keys they make. test_ddp.py runs real DTensor jobs under torchrun."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from aotcache import _core
from aotcache.capture import distributed_tensor
from aotcache.capture import graph as capture
from aotcache.errors import Bypass

pytestmark = pytest.mark.frames_off_too  # runs again with the frame cache off (make test)


@pytest.fixture(scope="module")
def mesh():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=4)
    try:
        yield init_device_mesh("cpu", (4,))
    finally:
        dist.destroy_process_group()


def _dtensor(mesh, shape, placements):
    from torch.distributed.tensor import DTensor

    local = torch.randn(shape)
    return DTensor.from_local(local, mesh, placements, run_check=False)


def _graph(fn, *args) -> torch.fx.GraphModule:
    """Dynamo's graph of `fn` on `args` (with its example values in node meta), as the backend gets it."""
    got = []

    def backend(gm, example_inputs):
        got.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return got[0]


def test_placements_are_keyed_by_kind_and_fields():
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard, _MaskPartial, _StridedShard

    texts = [
        distributed_tensor.placement_text(p)
        for p in (Shard(0), Shard(-1), Replicate(), Partial(), Partial("max"), _StridedShard(0, split_factor=2))
    ]
    assert texts == [
        "Shard(dim=0)",
        "Shard(dim=-1)",
        "Replicate()",
        "Partial(sum)",
        "Partial(max)",
        "_StridedShard(dim=0, split_factor=2)",
    ]
    with pytest.raises(Bypass) as e:  # carries a tensor buffer: not a value aotcache keys
        distributed_tensor.placement_text(_MaskPartial())
    assert e.value.code == "unencodable_value"


def test_a_mesh_is_its_layout_and_groups_and_the_coordinate_only_when_asked(mesh):
    text = distributed_tensor.mesh_text(mesh, coordinate=False)
    assert "groups=(" in text and "ranks=(0, 1, 2, 3)" in text and "coordinate" not in text
    assert distributed_tensor.mesh_text(mesh, coordinate=True).startswith("DeviceMesh(cpu, coordinate=(1,), ")
    from torch.distributed.device_mesh import DeviceMesh

    other = DeviceMesh.from_group(dist.new_group(list(range(4))), "cpu")
    assert other == mesh  # equal to Dynamo's guards...
    assert distributed_tensor.mesh_text(other, False) != text  # ...but its collectives run on another group


def test_dtensor_inputs_keyed_by_spec_and_local_tensor(mesh):
    from torch.distributed.tensor import Replicate, Shard

    def fn(a, b):
        return torch.mm(a, b).full_tensor()

    keys = {}
    for name, pa, pb in (("rows", Shard(0), Replicate()), ("cols", Replicate(), Shard(1))):
        a, b = _dtensor(mesh, (2, 4) if name == "rows" else (8, 4), [pa]), _dtensor(mesh, (4, 8), [pb])
        gm, inputs = _graph(fn, a, b)
        dt = distributed_tensor.context(gm, inputs)
        assert dt is not None and not dt.coordinate  # even shards, no random op
        metas = capture.capture_inputs(inputs, dtensors=dt)
        graph = capture.capture_graph(gm, dtensors=dt)
        key = _core.compute_key(graph, metas, {}, {"dtensor": dt.rows}, {}, {})
        summary = next(s for n, _, s in key.manifest if n == "inputs")
        assert "DTensor[Tensor](placements=" in summary, summary
        keys[name] = key.hex
    assert keys["rows"] != keys["cols"]


def test_the_coordinate_is_keyed_for_uneven_shards_and_random_ops(mesh):
    from torch.distributed.tensor import Shard

    even, uneven = _dtensor(mesh, (2, 4), [Shard(0)]), _dtensor(mesh, (2, 4), [Shard(0)])
    uneven = type(uneven).from_local(uneven.to_local(), mesh, [Shard(0)], run_check=False, shape=(7, 4), stride=(4, 1))
    gm, inputs = _graph(lambda a: (a * 2).full_tensor(), even)
    assert not distributed_tensor.context(gm, inputs).coordinate
    gm, inputs = _graph(lambda a: (a * 2).full_tensor(), uneven)
    assert distributed_tensor.context(gm, inputs).coordinate
    gm, inputs = _graph(lambda a: torch.nn.functional.dropout(a, 0.5).full_tensor(), even)
    assert distributed_tensor.context(gm, inputs).coordinate
    gm, inputs = _graph(lambda x: x * 2, torch.randn(3))
    assert distributed_tensor.context(gm, inputs) is None  # every other graph's key is unchanged


def test_dispatch_state_rows_pin_strategies_registered_outside_torch(monkeypatch, mesh):
    from torch.distributed.tensor import DTensor

    base = distributed_tensor._dispatch_rows()
    assert base == ["implicit replication: False"]
    propagator = DTensor._op_dispatcher.sharding_propagator
    op = torch.ops.aten.sin.default

    def users_strategy(op_schema):
        return None

    monkeypatch.setitem(propagator.op_strategy_funcs, op, users_strategy)
    rows = distributed_tensor._dispatch_rows()
    assert len(rows) == 2 and rows[1].startswith("strategy aten.sin.default: ")

    def users_other_strategy(op_schema):
        return 1

    monkeypatch.setitem(propagator.op_strategy_funcs, op, users_other_strategy)
    assert distributed_tensor._dispatch_rows()[1] != rows[1]
    monkeypatch.setattr(DTensor._op_dispatcher, "_allow_implicit_replication", True)
    assert distributed_tensor._dispatch_rows()[0] == "implicit replication: True"
    # A single-dim strategy: its function and the flags of its registration.
    from torch.distributed.tensor._ops.single_dim_strategy import _SingleDimStrategyInfo

    single = propagator.op_single_dim_strategy_funcs
    monkeypatch.setitem(single, op, _SingleDimStrategyInfo(users_strategy, allow_uneven_sharding=False))
    even = [r for r in distributed_tensor._dispatch_rows() if r.startswith("single-dim strategy")]
    monkeypatch.setitem(single, op, _SingleDimStrategyInfo(users_strategy, allow_uneven_sharding=True))
    uneven = [r for r in distributed_tensor._dispatch_rows() if r.startswith("single-dim strategy")]
    assert len(even) == len(uneven) == 1 and "allow_uneven_sharding=False" in even[0] and even != uneven


def test_a_patched_dtensor_method_is_pinned_by_content(monkeypatch, mesh):
    from torch.distributed.tensor import DTensor

    x = _dtensor(mesh, (2, 4), [])
    assert distributed_tensor.patched_method(x, "redistribute") is None
    assert distributed_tensor.patched_method(x, "view") is None  # torch.Tensor's: capture's own check covers it
    original = DTensor.full_tensor

    def full_tensor(self, *, grad_placements=None):
        return original(self, grad_placements=grad_placements) * 2

    monkeypatch.setattr(DTensor, "full_tensor", full_tensor)
    assert distributed_tensor.patched_method(x, "full_tensor").startswith("function ")
    assert distributed_tensor.patched_method(torch.randn(2), "full_tensor") is None
