"""The benchmark's models, defined in code with random weights (seeded: the same weights in every process).

Each workload builds a model and its inputs, and runs one step through the compiled model: a training step
(forward, loss, backward) or an inference step (eval mode, no_grad). `bench/worker.py` times the first step (it
includes the compile) and a second one (steady state).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from aotcache.demo_model import GPTConfig, make_model_and_batch

# A step takes the compiled model and returns the tensors that the step produced (output, for training the loss).
Step = Callable[[Callable[..., Any]], Any]


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    kind: str  # "train" (forward + backward) or "inference" (eval, no_grad)
    build: Callable[[], tuple[nn.Module, Step]]


def _train_step(inputs: tuple[torch.Tensor, ...], loss_fn: Callable[[Any], torch.Tensor]) -> Step:
    def step(compiled: Callable[..., Any]) -> Any:
        loss = loss_fn(compiled(*inputs))
        loss.backward()
        return loss.detach()

    return step


def _inference_step(inputs: tuple[torch.Tensor, ...]) -> Step:
    def step(compiled: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return compiled(*inputs)

    return step


# ---------------------------------------------------------------------------------------------------------------


def mlp() -> tuple[nn.Module, Step]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))
    return model, _train_step((x,), lambda out: F.cross_entropy(out, y))


GPT_BLOCK = GPTConfig(vocab_size=512, context=64, dim=128, heads=4, layers=1)


def gpt_block() -> tuple[nn.Module, Step]:
    model, idx, targets = make_model_and_batch(seed=0, batch=4, cfg=GPT_BLOCK)
    return model, _train_step((idx,), lambda logits: F.cross_entropy(logits.flatten(0, 1), targets.flatten()))


def gpt_demo() -> tuple[nn.Module, Step]:
    """The demo's model and training step as `python -m aotcache.demo` runs it (default GPTConfig: 2 layers)."""
    model, idx, targets = make_model_and_batch()
    return model, _train_step((idx,), lambda logits: F.cross_entropy(logits.flatten(0, 1), targets.flatten()))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def convnet() -> tuple[nn.Module, Step]:
    torch.manual_seed(0)
    model = ConvNet().eval()
    return model, _inference_step((torch.randn(8, 3, 32, 32),))


class CheckpointedMLP(nn.Module):
    """Four residual MLP blocks, each under torch.utils.checkpoint (non-reentrant): Dynamo emits the higher-order
    op tag_activation_checkpoint."""

    def __init__(self, dim: int = 128, blocks: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            for _ in range(blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + checkpoint(block, x, use_reentrant=False)
        return x


def checkpointed() -> tuple[nn.Module, Step]:
    torch.manual_seed(0)
    model = CheckpointedMLP()
    x = torch.randn(32, 128)
    return model, _train_step((x,), lambda out: out.pow(2).mean())


def _generated(blocks: int) -> Callable[[], tuple[nn.Module, Step]]:
    def build() -> tuple[nn.Module, Step]:
        import graphs  # bench/graphs.py; the worker puts bench/ on sys.path

        torch.manual_seed(0)
        model = graphs.Stack(blocks, dim=16)
        return model, _inference_step((torch.randn(4, 16),))

    return build


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("mlp", "MLP 256-512-512-10, batch 64, training step", "train", mlp),
        Workload(
            "gpt_block",
            "GPT-style model, 1 block (dim 128, 4 heads, context 64, vocab 512), batch 4, training step",
            "train",
            gpt_block,
        ),
        Workload(
            "gpt_demo",
            "the demo's GPT-style model (2 layers, dim 128, 4 heads, context 64, vocab 512), batch 4, training step",
            "train",
            gpt_demo,
        ),
        Workload("convnet", "3-conv net with BatchNorm, 8x3x32x32, inference (eval, no_grad)", "inference", convnet),
        Workload(
            "checkpoint",
            "4 residual MLP blocks (dim 128) under torch.utils.checkpoint, batch 32, training step",
            "train",
            checkpointed,
        ),
        Workload("graph_100", "generated stack, 6 blocks: ~100 FX nodes, inference", "inference", _generated(6)),
        Workload("graph_1k", "generated stack, 62 blocks: ~1,000 FX nodes, inference", "inference", _generated(62)),
        Workload("graph_10k", "generated stack, 625 blocks: ~10,000 FX nodes, inference", "inference", _generated(625)),
    )
}
