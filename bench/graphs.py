"""Dynamo-captured graphs of about 100, 1,000 and 10,000 nodes for the key benchmark.

Each model is a deep stack of small pre-norm gated blocks (LayerNorm -> Linear -> chunk -> sigmoid gate -> Linear ->
scaled residual add), 16 FX nodes per block with Dynamo's default inlining of nn modules (6 parameters lifted to
placeholders, 10 calls: torch functions, a tensor method, operator.getitem/mul/add, int/float/kwarg arguments).
The graph is captured by compiling with a recording backend that keeps (gm, example_inputs) and returns gm.forward,
so the benchmark sees exactly what a torch.compile backend receives.

    .venv/bin/python bench/graphs.py     # prints the node counts and capture times
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn

NODES_PER_BLOCK = 16
# Size name -> number of blocks; the graph also has the input placeholder and the output node.
SIZES = {"100": 6, "1k": 62, "10k": 625}


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.fc(self.norm(x)).chunk(2, dim=-1)
        return x + 0.5 * self.proj(a * torch.sigmoid(b))


class Stack(nn.Module):
    def __init__(self, blocks: int, dim: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return F.relu(x)


@dataclass
class Captured:
    name: str
    blocks: int
    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    dynamo_seconds: float

    @property
    def nodes(self) -> int:
        return len(self.gm.graph.nodes)

    def op_counts(self) -> dict[str, int]:
        return dict(Counter(n.op for n in self.gm.graph.nodes))


def capture(name: str, blocks: int, dim: int = 16, batch: int = 4) -> Captured:
    """Compiles a `blocks`-deep stack with a recording backend and returns the one graph Dynamo produced."""
    torch.manual_seed(0)
    model = Stack(blocks, dim)
    x = torch.randn(batch, dim)
    recorded: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def record(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        recorded.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    t0 = time.perf_counter()
    torch.compile(model, backend=record, fullgraph=True)(x)
    seconds = time.perf_counter() - t0
    if len(recorded) != 1:
        raise RuntimeError(f"expected one graph, Dynamo produced {len(recorded)}")
    gm, example_inputs = recorded[0]
    return Captured(name, blocks, gm, example_inputs, seconds)


def capture_all(sizes: dict[str, int] | None = None) -> list[Captured]:
    return [capture(name, blocks) for name, blocks in (sizes or SIZES).items()]


def main() -> None:
    print(f"{'size':>5} {'blocks':>6} {'nodes':>6} {'inputs':>6} {'dynamo s':>9}  ops")
    for c in capture_all():
        counts = f"{c.name:>5} {c.blocks:>6} {c.nodes:>6} {len(c.example_inputs):>6}"
        print(f"{counts} {c.dynamo_seconds:>9.2f}  {c.op_counts()}")


if __name__ == "__main__":
    main()
