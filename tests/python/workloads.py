"""Workloads that the tests run in fresh processes: `python workloads.py NAME OUT.pt [options]`.

Each compiles a small real model with backend="aotcache", saves its outputs and gradients to OUT.pt, and prints one
JSON line (prefix RESULT) with aotcache.stats() and torch's own cache counters, for the parent test to check.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import torch
import torch.nn.functional as F

import aotcache
from aotcache.demo_model import GPTConfig, make_model_and_batch


def mlp(args) -> dict:
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dtype)
    x = torch.randn(args.batch, 16, dtype=dtype, requires_grad=args.input_grad)
    compiled = torch.compile(model, backend="aotcache", options=json.loads(args.options) if args.options else None)
    with torch.set_grad_enabled(not args.no_grad):
        y = compiled(x)
        if not args.no_grad:
            y.sum().backward()
    out = {"y": y.detach()}
    if not args.no_grad:
        out.update({n: p.grad for n, p in model.named_parameters()})
        if args.input_grad:
            out["x.grad"] = x.grad
    return out


def gpt(args) -> dict:
    torch.use_deterministic_algorithms(True)
    model, idx, targets = make_model_and_batch(cfg=GPTConfig(vocab_size=64, context=16, dim=32, heads=2, layers=1))
    compiled = torch.compile(model, backend="aotcache")
    logits = compiled(idx)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    model.eval()
    with torch.no_grad():
        inference = compiled(idx)
    out = {"logits": logits.detach(), "inference": inference}
    out.update({n: p.grad for n, p in model.named_parameters()})
    return out


@torch._dynamo.allow_in_graph
def opaque_helper(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def python_function(args) -> dict:
    torch.manual_seed(0)
    x = torch.randn(4, 4)
    compiled = torch.compile(lambda t: opaque_helper(t).sin(), backend="aotcache")
    return {"y": compiled(x)}


def dynamic(args) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    x = torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    compiled = torch.compile(model, backend="aotcache")
    return {"y": compiled(x).detach()}


WORKLOADS = {"mlp": mlp, "gpt": gpt, "python_function": python_function, "dynamic": dynamic}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(WORKLOADS))
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--input-grad", action="store_true")
    parser.add_argument("--options", help="Inductor options for torch.compile, as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(levelname)s %(message)s", stream=sys.stdout)
    logging.getLogger("torch").setLevel(logging.WARNING)
    tensors = WORKLOADS[args.name](args)
    torch.save(tensors, args.out)
    from torch._dynamo.utils import counters

    print(
        "RESULT "
        + json.dumps(
            {
                "stats": aotcache.stats(),
                "aot_autograd": dict(counters["aot_autograd"]),
                "inductor": dict(counters["inductor"]),
            }
        )
    )


if __name__ == "__main__":
    main()
