"""Captures the fixture graphs of tests/data/graphs from real models, for the C++ graph-format tests.

Each model is compiled with a torch.compile backend that runs aotcache's capture layer on Dynamo's graph (the graph
the aotcache backend keys) and writes, per model:
  <name>.aotg    the captured graph and inputs in the graph format (_core.serialize_graph), constants included
  <name>.expect  what the C++ tests must find again without Python: node and subgraph counts, the number of inputs,
                 the graph and inputs digests of the key and the verdict of the checks, as computed here.

Higher-order-op bodies (checkpoint, cond) are captured by the capture layer as `subgraph` get_attr nodes.

Usage: .venv/bin/python scripts/capture_fixture_graphs.py [OUT_DIR]   (default tests/data/graphs)
"""

from __future__ import annotations

import hashlib
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from aotcache import _core
from aotcache.capture import graph as capture

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.out = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
        return self.out(h + x)


class Cond(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return torch.cond(y.sum() > 0, lambda t: t.relu() * 2, lambda t: t.sin() - 1, (y,))


def _train_input(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=True)


# name -> (model, example input, train: run a backward through the compiled model)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor], bool]] = {
    "mlp": (MLP, lambda: torch.randn(8, 64), False),
    "transformer_block": (TransformerBlock, lambda: _train_input(2, 16, 64), True),
    "conv_net": (lambda: ConvNet().eval(), lambda: torch.randn(2, 3, 32, 32), False),
    "checkpoint": (Checkpointed, lambda: _train_input(8, 32), True),
    "cond": (Cond, lambda: torch.randn(4, 16), False),
}


def _walk(gm: torch.fx.GraphModule, constants: dict[bytes, bytes]) -> tuple[int, int]:
    """(nodes, subgraphs) of `gm` with its higher-order-op bodies, counted as the IR holds them (a body that two
    get_attr nodes share counts twice); collects the bytes of constant tensors into `constants`."""
    nodes = subgraphs = 0
    for node in gm.graph.nodes:
        nodes += 1
        if node.op != "get_attr":
            continue
        value = capture._fetch_attr(gm, node.target)
        if isinstance(value, torch.fx.GraphModule):
            sub_nodes, sub_subgraphs = _walk(value, constants)
            nodes += sub_nodes
            subgraphs += 1 + sub_subgraphs
        elif isinstance(value, torch.Tensor):
            data = capture._tensor_bytes(value)
            constants[hashlib.sha256(data).digest()] = data
    return nodes, subgraphs


def capture_model(name: str) -> tuple[bytes, dict[str, Any]]:
    make_model, make_input, train = MODELS[name]
    model, x = make_model(), make_input()
    seen: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        seen.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(model, backend=backend, fullgraph=True)(x)
    if train:
        out.sum().backward()  # the compiled forward runs under autograd: a training step, as in real use
    assert len(seen) == 1, f"{name}: expected one graph, Dynamo produced {len(seen)}"
    gm, example_inputs = seen[0]
    constants: dict[bytes, bytes] = {}
    nodes, subgraphs = _walk(gm, constants)
    graph = capture.capture_graph(gm)  # exactly what the backend keys, higher-order-op bodies included
    inputs = capture.capture_inputs(example_inputs)
    key = _core.compute_key(graph, inputs, {}, {}, {}, {})
    digests = {component: digest for component, digest, _ in key.manifest}
    verdict = _core.check_graph(graph)
    expect = {
        "nodes": nodes,
        "subgraphs": subgraphs,
        "inputs": len(inputs),
        "graph_digest": digests["graph"],
        "inputs_digest": digests["inputs"],
        "check": "cacheable" if verdict is None else verdict[0],
    }
    return _core.serialize_graph(graph, inputs, constants), expect


def main() -> None:
    out_dir = pathlib.Path(
        sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "tests/data/graphs"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        data, expect = capture_model(name)
        (out_dir / f"{name}.aotg").write_bytes(data)
        (out_dir / f"{name}.expect").write_text("".join(f"{k} {v}\n" for k, v in expect.items()))
        print(f"{name}: {len(data)} bytes, {expect['nodes']} nodes, {expect['subgraphs']} subgraphs, {expect['check']}")


if __name__ == "__main__":
    main()
