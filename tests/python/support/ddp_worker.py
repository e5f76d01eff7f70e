"""One torchrun rank of a DistributedDataParallel training job (gloo, CPU) compiled with torch.compile under
Dynamo's defaults (optimize_ddp on: the graph is split at bucket boundaries). test_ddp.py runs it.

Usage: ddp_worker.py BACKEND OUT_PREFIX [BUCKET_CAP_MB]   (writes OUT_PREFIX.<rank>)

BACKEND: `inductor` (the reference: torch's caches off), `inductor-cached` (torch's caches on: bench/jobs.py) or
`aotcache`. The output holds the rank's results, aotcache's counters, and `timing`: seconds from the start of the
training loop to the end of the first step, and of all steps.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(512, 512) for _ in range(4)])
        self.norm = torch.nn.LayerNorm(512)
        self.head = torch.nn.Linear(512, 4)

    def forward(self, x):
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x)) + x
        return self.head(self.norm(x))


def main() -> int:
    backend, out = sys.argv[1], sys.argv[2]
    bucket_cap_mb = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    if backend == "inductor":  # the reference: uncached
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    compiled = torch.compile(ddp, backend="inductor" if backend == "inductor-cached" else backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(100 + rank)
    losses = []
    t0 = time.perf_counter()
    first_step_s = 0.0
    for i in range(3):
        x = torch.randn(8, 512)
        y = torch.randint(0, 4, (8,))
        loss = torch.nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
        if i == 0:
            first_step_s = time.perf_counter() - t0
    timing = {"first_step_s": first_step_s, "steps_s": time.perf_counter() - t0}
    result = {"losses": torch.stack(losses), **{f"param.{k}": v.detach().clone() for k, v in model.named_parameters()}}
    stats = None
    if backend == "aotcache":
        import aotcache

        stats = aotcache.stats()
    torch.save({"out": result, "stats": stats, "timing": timing}, f"{out}.{rank}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
