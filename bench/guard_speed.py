"""Guard evaluation speed the way torch does it, for comparison with build/cpp/aotcache_guard_bench (C++).

The guards are the ones torch 2.13 produces for `F.conv1d(x, w, stride=2)` under automatic dynamic shapes (compiled
twice with different sizes, AOTAutograd included): 10 ShapeEnv guards over 6 size symbols, the same 10 guard texts
that src/guard/guard_bench.cc evaluates (docs/formats/guard-format.md). Measured, per entry:

- `ShapeEnv.evaluate_guards_expression(code, args)` on the code of `produce_guards_expression(placeholders)`: torch's
  own API (it `eval`s the code string on every call; the code also checks the inputs' sizes and strides against the
  symbols, which aotcache does before its guards, so it covers a little more than the 10 guards);
- the same code compiled once (`compile(code, ...)`), evaluated with torch's `SYMPY_INTERP` globals: what a
  precompiled guard lambda costs;
- sympy: `bool(guard.expr.subs(values))` for each of the 10 ShapeEnv guard expressions;
- lookup among 100 entries of one key, 10 guards each (the conv guards but the first, then `s0 == k`; only the last
  entry matches), with the precompiled code and with sympy subs.

    /work/main/.venv/bin/python bench/guard_speed.py [--budget 1]
"""

from __future__ import annotations

import argparse
import time

import sympy
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP


def capture_conv_guards():
    """(shape_env, fake placeholders, real inputs) of the conv1d graph compiled with automatic dynamic shapes."""
    seen: list = []

    def backend(gm, example_inputs):
        fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        seen.append((fakes, list(example_inputs)))
        return aot_autograd(fw_compiler=lambda g, _inputs: make_boxed_func(g))(gm, example_inputs)

    torch._dynamo.reset()
    f = torch.compile(lambda x, w: F.conv1d(x, w, stride=2), backend=backend)
    f(torch.randn(1, 2, 17), torch.randn(3, 2, 3))
    f(torch.randn(4, 5, 20), torch.randn(6, 5, 6))
    fakes, example = seen[-1]
    env = next(t.fake_mode.shape_env for t in fakes if isinstance(t, torch.Tensor))
    # Dynamo passes size inputs to the backend as SymInts; the guards are evaluated on their concrete values.
    real = [int(env.backed_var_to_val[x.node.expr]) if isinstance(x, torch.SymInt) else x for x in example]
    return env, fakes, real


def time_us(budget: float, fn) -> float:
    reps = 1
    while True:
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return elapsed / reps * 1e6
        reps *= 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args()

    env, fakes, real = capture_conv_guards()
    guards = [g.expr for g in env.guards]
    code = env.produce_guards_expression(fakes)
    assert code is not None and env.evaluate_guards_expression(code, real)
    names = {f"t{i}": v for i, v in enumerate(real)}
    compiled = compile(code, "<guards>", "eval")
    assert eval(compiled, SYMPY_INTERP, {"L": names})

    # The symbols' values: the sizes they were created for (a guard may name a symbol that the placeholders no
    # longer show, replaced by an equal one, e.g. w.size(1) by x.size(1)).
    first_symbol = next(
        f.node.expr for f in fakes if isinstance(f, torch.SymInt) and isinstance(f.node.expr, sympy.Symbol)
    )
    symbols = {first_symbol}.union(*(g.free_symbols for g in guards))
    values = {s: int(env.backed_var_to_val[s]) for s in sorted(symbols, key=str)}
    assert all(bool(g.subs(values)) for g in guards)

    print(f"guards per entry: {len(guards)} over {len(values)} symbols (torch {torch.__version__})")
    for g in guards:
        print(f"  {g}")
    torch_api = time_us(args.budget, lambda: env.evaluate_guards_expression(code, real))
    precompiled = time_us(args.budget, lambda: eval(compiled, SYMPY_INTERP, {"L": dict(names)}))
    subs = time_us(args.budget, lambda: all(bool(g.subs(values)) for g in guards))
    print(f"evaluate_guards_expression (eval of code):   {torch_api:10.3f} us")
    print(f"precompiled guard code:                      {precompiled:10.3f} us")
    print(f"sympy subs, 10 guards:                       {subs:10.3f} us")

    # 100 entries of one key, k = v-99 .. v where v is the first symbol's value: only the last entry matches.
    t0_name = next(n for n, f in zip(names, fakes) if isinstance(f, torch.SymInt) and f.node.expr == first_symbol)
    v = values[first_symbol]
    ks = range(v - 99, v + 1)
    entries_code = [compile(f"({code}) and L['{t0_name}'] == {k}", "<guards>", "eval") for k in ks]
    entries_sympy = [guards[1:] + [sympy.Eq(first_symbol, k)] for k in ks]

    def lookup_code():
        return next(i for i, c in enumerate(entries_code) if eval(c, SYMPY_INTERP, {"L": dict(names)}))

    def lookup_sympy():
        return next(i for i, e in enumerate(entries_sympy) if all(bool(g.subs(values)) for g in e))

    assert lookup_code() == 99 and lookup_sympy() == 99
    print(f"lookup 100 x 10, precompiled code:           {time_us(args.budget, lookup_code):10.3f} us")
    print(f"lookup 100 x 10, sympy subs:                 {time_us(args.budget, lookup_sympy):10.3f} us")


if __name__ == "__main__":
    main()
