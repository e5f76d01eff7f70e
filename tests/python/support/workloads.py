"""Workloads that the tests run in fresh processes: `python workloads.py NAME OUT.pt [options]`.

Each compiles a small real model with backend="aotcache", saves its outputs and gradients to OUT.pt, and prints one
JSON line (prefix RESULT) with aotcache.stats() and torch's own cache counters, for the parent test to check.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

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


def shapes(args) -> dict:
    """One model called at several batch sizes (--sizes 16,24): symbolic graphs under --dynamic-mode
    mark (mark_dynamic on dim 0, optional --max), true (dynamic=True), automatic (recompiles turn dynamic)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

    def step(x):
        h = model(x.view(-1, 8))
        if args.head:  # slicing to a constant length: guards s0 >= head or s0 < head, on the same graph
            h = h[: args.head]
        if args.fold:  # folding rows into a symbolic count: divisibility guards (s0 % (s0 // 4) == 0 or != 0)
            h = h.reshape(x.shape[0] // 4, -1)
        return h.sum(0) * x.shape[0] + h.mean()

    compiled = torch.compile(step, backend="aotcache", dynamic=True if args.dynamic_mode == "true" else None)
    out = {}
    for n in (int(s) for s in args.sizes.split(",")):
        x = torch.randn(n, 8, generator=torch.Generator().manual_seed(n), requires_grad=args.input_grad)
        if args.dynamic_mode == "mark":
            if args.max:
                torch._dynamo.mark_dynamic(x, 0, min=2, max=args.max)
            else:
                torch._dynamo.mark_dynamic(x, 0)
        with torch.set_grad_enabled(not args.no_grad):
            y = compiled(x)
            out[f"y{n}"] = y.detach()
            if args.input_grad:
                y.sum().backward()
                out[f"x{n}.grad"] = x.grad
    return out


def _barrier(directory: str, count: str, timeout: float = 300) -> None:
    """Processes started together import torch at different speeds: line them up so their compiles overlap."""
    os.makedirs(directory, exist_ok=True)
    open(os.path.join(directory, str(os.getpid())), "w").close()
    deadline = time.monotonic() + timeout
    while len(os.listdir(directory)) < int(count):
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {directory}: {len(os.listdir(directory))} of {count} after {timeout}s")
        time.sleep(0.01)


# Inductor's compiler (lowering, kernel templates, code generators, decompositions) and its debug module: a compile
# imports them; a warm hit need not (aotcache.wrapper_loading).
INDUCTOR_COMPILER_MODULES = (
    "torch._inductor.debug",
    "torch._inductor.decomposition",
    "torch._inductor.graph",
    "torch._inductor.select_algorithm",
    "torch._inductor.codegen.memory_planning",
    "torch._inductor.lowering",
)

WORKLOADS = {"mlp": mlp, "gpt": gpt, "python_function": python_function, "shapes": shapes}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(WORKLOADS))
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--input-grad", action="store_true")
    parser.add_argument("--options", help="Inductor options for torch.compile, as JSON")
    parser.add_argument("--sizes", default="16", help="shapes: batch sizes, comma-separated")
    parser.add_argument("--dynamic-mode", default="mark", choices=["mark", "true", "automatic"])
    parser.add_argument("--max", type=int, default=0, help="shapes: mark_dynamic's upper bound")
    parser.add_argument("--head", type=int, default=0, help="shapes: keep the first HEAD rows")
    parser.add_argument("--fold", action="store_true", help="shapes: reshape rows into batch // 4 groups")
    parser.add_argument(
        "--barrier", help="DIR:N: after the imports, wait until N processes reached the barrier DIR, then compile"
    )
    args = parser.parse_args()
    cxx_builds = _count_cxx_builds()
    if args.barrier:
        _barrier(*args.barrier.rsplit(":", 1))
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
                "cxx_builds": len(cxx_builds),
                "compiler_modules": sorted(m for m in INDUCTOR_COMPILER_MODULES if m in sys.modules),
            }
        )
    )


def _count_cxx_builds() -> list[str]:
    """Records every C++ build Inductor runs in this process (kernels, precompiled headers, ISA probes)."""
    from torch._inductor.cpp_builder import CppBuilder

    builds: list[str] = []
    real_build = CppBuilder.build

    def build(self, *a, **k):
        builds.append(self.get_target_file_path())
        return real_build(self, *a, **k)

    CppBuilder.build = build
    return builds


if __name__ == "__main__":
    main()
