"""Print the shape guards torch produces for small dynamic-shape programs, as aotcache stores them.

For each program: compile with an aot_eager-backed recording backend (AOTAutograd's guards included), then print
`str(expr)` of every ShapeEnv guard with its size symbols renamed canonically (s0, s1, ... by first appearance in the
graph inputs' sizes), and torch's own `produce_guards_expression` text. The vectors in src/guard/guard_test.cc come
from this output (docs/formats/guard-format.md).

    /work/main/.venv/bin/python scripts/torch_guard_vectors.py
"""

from __future__ import annotations

import sympy
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func


def canonical_symbols(fake_inputs) -> dict:
    """Size symbols of the inputs, in order of first appearance, mapped to s0, s1, ..."""
    mapping: dict = {}
    for t in fake_inputs:
        if isinstance(t, torch.SymInt):
            dims = [t]
        elif isinstance(t, torch.Tensor):
            dims = list(t.size()) + list(t.stride()) + [t.storage_offset()]
        else:
            continue
        for d in dims:
            if isinstance(d, torch.SymInt):
                for s in sorted(d.node.expr.free_symbols, key=str):
                    if s not in mapping:
                        mapping[s] = sympy.Symbol(f"s{len(mapping)}", integer=True, positive=True)
    return mapping


def record(store):
    def backend(gm, example_inputs):
        fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        store.append(fakes)
        return aot_autograd(fw_compiler=lambda g, _inputs: make_boxed_func(g))(gm, example_inputs)

    return backend


PROGRAMS = [
    ("view_8", lambda x: x.view(-1, 8) * 2, [torch.randn(64)]),
    ("if_gt_5", lambda x: x * 2 if x.size(0) > 5 else x + 1, [torch.randn(10)]),
    ("cat", lambda x, y: torch.cat([x, y]) * 2, [torch.randn(4, 3), torch.randn(5, 3)]),
    ("reshape_product", lambda x, y: x.reshape(-1) + y, [torch.randn(4, 6), torch.randn(24)]),
    ("matmul", lambda x, y: x @ y, [torch.randn(4, 6), torch.randn(6, 7)]),
    ("broadcast", lambda x, y: x + y, [torch.randn(4, 6), torch.randn(4, 6)]),
    ("floordiv_slice", lambda x: x[: x.size(0) // 2] * 2, [torch.randn(10)]),
    ("mod_branch", lambda x: x * 2 if x.size(0) % 3 == 1 else x, [torch.randn(10)]),
    ("min_slice", lambda x: x[: min(x.size(0), 5)] * 2, [torch.randn(10)]),
    ("max_pad", lambda x: x.new_zeros(max(x.size(0), 7)) + 1, [torch.randn(10)]),
    ("split", lambda x: torch.split(x, 3)[0] * 2, [torch.randn(10)]),
    ("chunk", lambda x: torch.chunk(x, 4)[0] * 2, [torch.randn(12)]),
    ("conv1d_stride", lambda x, w: F.conv1d(x, w, stride=2), [torch.randn(1, 2, 17), torch.randn(3, 2, 3)]),
    ("ne_branch", lambda x: x * 2 if x.size(0) != x.size(1) else x, [torch.randn(4, 6)]),
    ("view_2d", lambda x: x.view(x.size(0) * x.size(1) // 4, 4), [torch.randn(4, 6)]),
    ("pow_size", lambda x: x.new_zeros(x.size(0) ** 2) + 1, [torch.randn(5)]),
    ("truediv_scale", lambda x: x * (x.size(0) / 2), [torch.randn(6)]),
    ("view_middle", lambda x: x.view(2, -1, 3) * 1, [torch.randn(2, 6, 3)]),
    ("arange", lambda x: torch.arange(x.size(0) * 2 - 1) + 1, [torch.randn(6)]),
    ("interpolate", lambda x: F.interpolate(x, scale_factor=2.5), [torch.randn(1, 1, 8)]),
    ("unfold", lambda x: x.unfold(0, 3, 2) * 1, [torch.randn(11)]),
    ("abs_diff", lambda x, y: x.new_zeros(abs(x.size(0) - y.size(0)) + 1), [torch.randn(4), torch.randn(9)]),
    ("and_branch", lambda x: x * 2 if (x.size(0) > 3 and x.size(0) < 100) else x, [torch.randn(10)]),
    ("repeat_interleave", lambda x: x.repeat(2, 1).view(-1, x.size(1) * 2), [torch.randn(4, 6)]),
]


def main() -> None:
    for name, fn, inputs in PROGRAMS:
        for mode in ("mark_dynamic", "automatic"):
            torch._dynamo.reset()
            store: list = []
            f = torch.compile(fn, backend=record(store), dynamic=None)
            try:
                if mode == "mark_dynamic":
                    for x in inputs:
                        for d in range(x.dim()):
                            torch._dynamo.maybe_mark_dynamic(x, d)
                    f(*inputs)
                else:
                    f(*inputs)
                    f(*[torch.randn([s + 3 for s in x.shape]) for x in inputs])
            except Exception as e:  # noqa: BLE001 - a vector generator reports and goes on
                print(f"== {name} [{mode}] ERROR {type(e).__name__}: {str(e)[:120]}")
                continue
            if not store:
                continue
            fakes = store[-1]
            envs = [t.fake_mode.shape_env for t in fakes if isinstance(t, torch.Tensor)]
            envs += [t.node.shape_env for t in fakes if isinstance(t, torch.SymInt)]
            if not envs:
                print(f"== {name} [{mode}] no symbolic inputs")
                continue
            env = envs[0]
            mapping = canonical_symbols(fakes)
            guards = [str(g.expr.xreplace(mapping)) for g in env.guards]
            print(f"== {name} [{mode}] symbols {[f'{k}->{v}' for k, v in mapping.items()]}")
            for g in guards:
                print(f"  guard: {g}")
            try:
                print(f"  produce_guards_expression: {env.produce_guards_expression(fakes)}")
            except Exception as e:  # noqa: BLE001
                print(f"  produce_guards_expression ERROR {type(e).__name__}: {str(e)[:120]}")


if __name__ == "__main__":
    main()
