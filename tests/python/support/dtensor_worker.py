"""One torchrun rank of DTensor workloads (gloo, CPU), every case in one process. test_dtensor.py runs it cold, warm
and as the uncached inductor reference.

Cases:
- tp_mlp: an MLP under tensor parallelism (`parallelize_module`, ColwiseParallel then RowwiseParallel), two SGD steps;
- tp_block: a transformer block in torchtitan's plan (attention q/k/v colwise, output rowwise; MLP colwise/rowwise);
- specs: one function, `torch.mm(a, b).full_tensor()`, called on DTensors of three placement pairs: the graphs are
  node for node the same, only the inputs' specs differ;
- uneven: an elementwise function on a tensor sharded unevenly (each rank pads and unpads its own way);
- dropout: dropout on a sharded DTensor (its random offsets come from the rank's coordinate);
- tp_2d (4 ranks): a ("dp", "tp") mesh, tensor parallelism on its "tp" dimension: two tp groups.

With DTENSOR_MESH_FROM_GROUP=1 the mesh is made from a new process group of every rank: equal to the default mesh
to Dynamo's guards (same layout), but its collectives run on another group, named in the compiled code.

Usage: dtensor_worker.py BACKEND OUT_PREFIX   (BACKEND: inductor, the reference with torch's caches off, or aotcache;
writes OUT_PREFIX.<rank>: each case's outputs, gradients and parameters as local tensors, aotcache's counters)
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(torch.nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Block(torch.nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.q = torch.nn.Linear(dim, dim, bias=False)
        self.k = torch.nn.Linear(dim, dim, bias=False)
        self.v = torch.nn.Linear(dim, dim, bias=False)
        self.o = torch.nn.Linear(dim, dim, bias=False)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = MLP(dim, 2 * dim)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        # -1 for the heads: under tensor parallelism each rank holds heads / world of them.
        q, k, v = (p(h).view(b, t, -1, 8).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.mlp(self.norm2(x))


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard; a plain tensor (a parameter no plan shards) itself."""
    return t.to_local() if hasattr(t, "to_local") else t


def _train(model: torch.nn.Module, backend: str, inputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    compiled = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out: dict[str, torch.Tensor] = {}
    for step, x in enumerate(inputs):
        y = compiled(x)
        y.square().mean().backward()
        out[f"y{step}"] = y.detach().clone()
        for name, p in model.named_parameters():
            out[f"grad{step}.{name}"] = _local(p.grad).clone()
        opt.step()
        opt.zero_grad()
    out.update({f"param.{k}": _local(v).detach().clone() for k, v in model.named_parameters()})
    return out


def tp_mlp(mesh, backend: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = MLP()
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    torch.manual_seed(1)
    return _train(model, backend, [torch.randn(4, 16) for _ in range(2)])


def tp_block(mesh, backend: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(2)
    model = Block()
    plan = {
        "q": ColwiseParallel(),
        "k": ColwiseParallel(),
        "v": ColwiseParallel(),
        "o": RowwiseParallel(),
        "mlp.up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(),
    }
    parallelize_module(model, mesh, plan)
    torch.manual_seed(3)
    return _train(model, backend, [torch.randn(2, 6, 32) for _ in range(2)])


def specs(mesh, backend: str) -> dict[str, torch.Tensor]:
    fn = torch.compile(lambda a, b: torch.mm(a, b).full_tensor(), backend=backend)
    torch.manual_seed(4)
    a, b = torch.randn(8, 12), torch.randn(12, 6)
    out = {}
    pairs = [(Shard(0), Replicate()), (Replicate(), Shard(1)), (Shard(1), Shard(0))]
    for i, (pa, pb) in enumerate(pairs):
        da, db = distribute_tensor(a, mesh, [pa]), distribute_tensor(b, mesh, [pb])
        out[f"mm{i}"] = fn(da, db)
    return out


def uneven(mesh, backend: str) -> dict[str, torch.Tensor]:
    fn = torch.compile(lambda a: (a * 2 + 1).cumsum(1).full_tensor(), backend=backend)
    torch.manual_seed(5)
    a = distribute_tensor(torch.randn(2 * mesh.size() + 1, 8), mesh, [Shard(0)])
    return {"uneven": fn(a)}


def dropout(mesh, backend: str) -> dict[str, torch.Tensor]:
    fn = torch.compile(lambda a: F.dropout(a, 0.5, training=True).full_tensor(), backend=backend)
    a = distribute_tensor(torch.ones(4 * mesh.size(), 8), mesh, [Shard(0)])
    torch.manual_seed(6)
    return {"dropout": fn(a)}


CASES = {"tp_mlp": tp_mlp, "tp_block": tp_block, "specs": specs, "uneven": uneven, "dropout": dropout}


def main() -> int:
    backend, out = sys.argv[1], sys.argv[2]
    if backend == "inductor":  # the reference: uncached
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if os.environ.get("DTENSOR_MESH_FROM_GROUP") == "1":
        mesh = DeviceMesh.from_group(dist.new_group(list(range(world))), "cpu")
    else:
        mesh = init_device_mesh("cpu", (world,))
    result: dict[str, torch.Tensor] = {}
    for name, case in CASES.items():
        result.update({f"{name}.{k}": v for k, v in case(mesh, backend).items()})
    if world == 4:
        mesh_2d = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        result.update({f"tp_2d.{k}": v for k, v in tp_mlp(mesh_2d["tp"], backend).items()})
    stats = None
    if backend == "aotcache":
        import aotcache

        stats = aotcache.stats()
    torch.save({"out": result, "stats": stats}, f"{out}.{rank}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
