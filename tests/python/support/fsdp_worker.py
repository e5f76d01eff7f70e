"""One torchrun rank of an FSDP2 training job (gloo, CPU) in FSDP2's documented compile pattern: each block compiled,
then sharded (`block.compile(); fully_shard(block)`), the root sharded last. test_ddp.py runs it.

Usage: fsdp_worker.py BACKEND OUT_PREFIX   (BACKEND: inductor, the reference with torch's caches off, or aotcache;
writes OUT_PREFIX.<rank>: the losses, every parameter gathered in full, aotcache's counters)
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.lin = torch.nn.Linear(64, 64)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.lin(self.norm(x)))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(64, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> int:
    backend, out = sys.argv[1], sys.argv[2]
    if backend == "inductor":  # the reference: uncached
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    for block in model.blocks:
        block.compile(backend=backend)
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(100 + rank)
    losses = []
    for _ in range(2):
        x, y = torch.randn(8, 64), torch.randint(0, 4, (8,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    result = {"losses": torch.stack(losses)}
    result.update({f"param.{k}": v.full_tensor().detach().clone() for k, v in model.named_parameters()})
    stats = None
    if backend == "aotcache":
        import aotcache

        stats = aotcache.stats()
    torch.save({"out": result, "stats": stats}, f"{out}.{rank}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
