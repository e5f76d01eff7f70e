"""Adversarial cases: programs real users run, each compared under backend="aotcache" with backend="inductor".

Every case is a function `run(backend) -> dict` that seeds torch, builds its model and inputs, compiles with
`torch.compile(..., backend=backend)`, runs, and returns every observable result (outputs, gradients, updated
parameters, optimizer state, buffers, generated tokens, non-tensor outputs). Keys starting with "fact." are
observations of the cache itself (entries left in a directory, ...): never compared with inductor, checked
against `Case.facts` in the aotcache passes. Run by adversarial_worker.py, many cases per process;
docs/testing/adversarial-suite.md says what each case covers and why it expects what it expects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import aotcache

Expect = str | tuple[str, str]
""""hit": every graph of the warm process hits (0 misses, >= 1 hit);
("bypass", reason): every graph bypasses with `reason` in both aotcache processes;
("miss", why): the warm process misses (nothing can be cached across processes, e.g. a 5-byte size bound);
("error", kind): the warm process counts error `kind` (a damaged entry), recompiles, and is right."""


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[str], dict[str, Any]]
    expect: Expect = "hit"
    tol: tuple[float, float] | None = None
    """(atol, rtol) of aotcache's cold results against inductor's; None = bitwise. Warm vs cold is always bitwise."""
    eager_tol: tuple[float, float] | None = (1e-5, 1e-4)
    """(atol, rtol) against the same program under `eager_backend`; None = not compared (e.g. RNG streams)."""
    eager_backend: str = "eager"
    """The reference backend: "eager", or "aot_eager" where torch's "eager" backend itself fails."""
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Expected "fact.*" values in both aotcache processes."""
    warning: str | None = None
    """A substring one of aotcache's warnings must contain, in both aotcache processes."""
    damage: str | None = None
    """"flip", "truncate" or "delete": the harness damages the case's entry files between the cold and the warm
    process."""
    errors_ok: tuple[str, ...] = ()
    """Prefixes of error kinds this case may count (a fault it injects); any other error fails it."""
    note: str = ""


# ---- helpers ----------------------------------------------------------------------------------------------------
def _c(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def _grads(model: nn.Module, prefix: str = "grad.") -> dict[str, torch.Tensor]:
    return {prefix + n: _c(p.grad) for n, p in model.named_parameters() if p.grad is not None}


def _params(model: nn.Module, prefix: str = "param.") -> dict[str, torch.Tensor]:
    return {prefix + n: _c(p) for n, p in model.named_parameters()}


def _mlp(din: int = 8, dh: int = 16, dout: int = 4) -> nn.Module:
    return nn.Sequential(nn.Linear(din, dh), nn.GELU(), nn.Linear(dh, dout))


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


@contextlib.contextmanager
def _deterministic() -> Iterator[None]:
    """Inductor's CPU scatter-add backward (embeddings) accumulates in thread order otherwise."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _configured(**kwargs: Any) -> Iterator[None]:
    aotcache.configure(**kwargs)
    try:
        yield
    finally:
        aotcache.settings.reset()


def case_cache_dir(name: str, root: str | None = None) -> Path:
    """The private cache directory of a configuration case: beside AOTCACHE_DIR, shared by its cold and warm
    processes (the harness damages entries there)."""
    root = root or os.environ.get("AOTCACHE_DIR") or os.path.join(tempfile.gettempdir(), "aotcache-adversarial")
    return Path(root + ".cases") / name


def entry_files(cache_dir: Path) -> list[Path]:
    """The graph entries (and guard indexes) of a cache directory; frame entries (AOTCACHE_FRAMES=1) left out, so
    the facts hold with frames on and off. A frame entry's metadata, near the file's start, names its kind."""
    return sorted(p for p in (cache_dir / "entries").glob("*/*.aotc") if b"aotcache.frame" not in p.read_bytes()[:4096])


def _train_steps(model: nn.Module, compiled: Callable, xs: list[torch.Tensor]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, x in enumerate(xs):
        model.zero_grad(set_to_none=True)
        y = compiled(x)
        y.square().mean().backward()
        out[f"y{i}"] = _c(y)
        out.update(_grads(model, f"grad{i}."))
    return out


# ---- dynamic shapes ---------------------------------------------------------------------------------------------
def dyn_mark_dynamic(backend: str) -> dict:
    torch.manual_seed(0)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    out = {}
    with torch.no_grad():
        for n in (8, 12, 5, 8):
            x = _randn(n, 8, seed=n)
            torch._dynamo.mark_dynamic(x, 0)
            out[f"y{n}"] = f(x)
    return out


def dyn_mark_dynamic_bounds(backend: str) -> dict:
    torch.manual_seed(1)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    xs = []
    for n in (8, 16, 33):
        x = _randn(n, 8, seed=n)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
        xs.append(x)
    return _train_steps(model, f, xs)


def dyn_automatic_sizes(backend: str) -> dict:
    torch.manual_seed(2)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    return _train_steps(model, f, [_randn(n, 8, seed=n) for n in (4, 6, 9, 6)])


def dyn_automatic_python_int(backend: str) -> dict:
    # A Python int argument that changes between calls turns symbolic on the recompile (automatic dynamic).
    def f(x, n):
        return (x * n).sum(0) + n, x[:n].mean()

    g = torch.compile(f, backend=backend)
    x = _randn(8, 4, seed=0)
    out = {}
    for n in (2, 3, 5, 7, 3):
        a, b = g(x, n)
        out[f"a{n}"], out[f"b{n}"] = a, b
    return out


def dyn_true_train(backend: str) -> dict:
    torch.manual_seed(3)
    model = _mlp()
    f = torch.compile(model, backend=backend, dynamic=True)
    return _train_steps(model, f, [_randn(n, 8, seed=n) for n in (4, 7)])


def dyn_true_graph_break(backend: str) -> dict:
    def f(x):
        y = x.sin() * x.shape[0]
        torch._dynamo.graph_break()
        return (y.cos() + 1).sum(0) / x.shape[0]

    g = torch.compile(f, backend=backend, dynamic=True)
    return {f"y{n}": g(_randn(n, 4, seed=n)) for n in (3, 8, 5)}


def _branch(x):
    if x.shape[0] > 5:
        return x.sin().sum(0) * 2
    return x.cos().sum(0) - 1


def dyn_shape_branch_automatic(backend: str) -> dict:
    g = torch.compile(_branch, backend=backend)
    return {f"y{n}": g(_randn(n, 4, seed=n)) for n in (3, 4, 8, 10, 2)}


def dyn_shape_branch_dynamic_true(backend: str) -> dict:
    g = torch.compile(_branch, backend=backend, dynamic=True)
    return {f"y{n}": g(_randn(n, 4, seed=n)) for n in (3, 8, 10, 4)}


def dyn_view_half(backend: str) -> dict:
    def f(x):
        n = x.shape[0]
        return x.view(n // 2, 8).relu().sum(1)

    g = torch.compile(f, backend=backend)
    out = {}
    for n in (4, 6, 10):
        x = _randn(n, 4, seed=n, grad=True)
        torch._dynamo.mark_dynamic(x, 0)
        y = g(x)
        y.sum().backward()
        out[f"y{n}"], out[f"gx{n}"] = _c(y), _c(x.grad)
    return out


def dyn_cat_two_dynamic(backend: str) -> dict:
    def f(a, b):
        return torch.cat([a, b * 2]).cumsum(0)

    g = torch.compile(f, backend=backend)
    out = {}
    for n, m in ((3, 5), (6, 2), (7, 9)):
        a, b = _randn(n, 4, seed=n), _randn(m, 4, seed=100 + m)
        torch._dynamo.mark_dynamic(a, 0)
        torch._dynamo.mark_dynamic(b, 0)
        out[f"y{n}_{m}"] = g(a, b)
    return out


def dyn_zero_one_then_mark(backend: str) -> dict:
    # Size 1 is specialized on the first call; marking the dimension dynamic afterwards recompiles with s0 >= 2.
    def f(x):
        return (x * x.shape[0]).softmax(-1)

    g = torch.compile(f, backend=backend)
    out = {"y1": g(_randn(1, 4, seed=1))}
    for n in (5, 9):
        x = _randn(n, 4, seed=n)
        torch._dynamo.mark_dynamic(x, 0)
        out[f"y{n}"] = g(x)
    out["y1_again"] = g(_randn(1, 4, seed=11))
    return out


def dyn_two_dims_attention(backend: str) -> dict:
    torch.manual_seed(4)
    proj = nn.Linear(16, 48)

    def f(x):
        q, k, v = proj(x).view(x.shape[0], x.shape[1], 3, 2, 8).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 16)

    g = torch.compile(f, backend=backend)
    out = {}
    for b, t in ((2, 5), (3, 7)):
        x = _randn(b, t, 16, seed=b * 10 + t)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 1)
        y = g(x)
        y.sum().backward()
        out[f"y{b}_{t}"] = _c(y)
        out[f"gw{b}_{t}"] = _c(proj.weight.grad)
    return out


def dyn_transposed_input(backend: str) -> dict:
    def f(x):
        return (x @ x.t()).tanh().sum(1)

    g = torch.compile(f, backend=backend)
    out = {}
    for n in (5, 7):
        base = _randn(6, n, seed=n)
        x = base.t()  # non-contiguous, symbolic strides
        torch._dynamo.mark_dynamic(base, 1)
        out[f"y{n}"] = g(x)
    return out


def dyn_reshape_fold(backend: str) -> dict:
    def f(x):
        return x.reshape(x.shape[0] // 4, -1).sum(1) * x.shape[0]

    g = torch.compile(f, backend=backend)
    return {f"y{n}": g(_randn(n, 3, seed=n)) for n in (8, 12, 16, 20)}


def dyn_unbacked_nonzero(backend: str) -> dict:
    def f(x):
        idx = torch.nonzero(x > 0)
        return idx.sum(0), x[x > 0] * 2

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        g = torch.compile(f, backend=backend, fullgraph=True)
        a, b = g(_randn(6, 5, seed=0))
    return {"idx_sum": a, "positive": b}


def dyn_unbacked_item_int(backend: str) -> dict:
    def f(x, k):
        n = k.item()
        torch._check(n >= 0)
        torch._check(n <= 8)
        return x[:n].sum(0) + torch.ones(n).sum()

    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        g = torch.compile(f, backend=backend, fullgraph=True)
        x = _randn(8, 4, seed=0)
        return {f"y{k}": g(x, torch.tensor(k)) for k in (3, 6)}


def dyn_unbacked_item_float(backend: str) -> dict:
    def f(x):
        s = x.abs().max().item()
        return x / s + 1

    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        g = torch.compile(f, backend=backend, fullgraph=True)
        return {"y": g(_randn(4, 4, seed=0))}


@torch.compiler.nested_compile_region
def _region(y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.sin(y @ w) * 2


def dyn_nested_compile_region(backend: str) -> dict:
    w = _randn(8, 8, seed=7, grad=True)

    def f(x):
        return _region(_region(x, w), w).sum(1)

    g = torch.compile(f, backend=backend)
    out = {}
    for n in (4, 9):
        x = _randn(n, 8, seed=n, grad=True)
        torch._dynamo.mark_dynamic(x, 0)
        y = g(x)
        y.sum().backward()
        out[f"y{n}"], out[f"gx{n}"], out[f"gw{n}"] = _c(y), _c(x.grad), _c(w.grad)
    return out


def dyn_layernorm_dynamic_true(backend: str) -> dict:
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))
    f = torch.compile(model, backend=backend, dynamic=True)
    return _train_steps(model, f, [_randn(n, 8, seed=n) for n in (4, 6)])


# ---- compiled optimizer steps -----------------------------------------------------------------------------------
def _optimizer_case(make: Callable[[Any], torch.optim.Optimizer]) -> Callable[[str], dict]:
    def run(backend: str) -> dict:
        torch.manual_seed(6)
        model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))
        opt = make(model.parameters())
        step = torch.compile(opt.step, backend=backend)
        x, target = _randn(16, 8, seed=1), _randn(16, 4, seed=2)
        out: dict[str, Any] = {}
        for i in range(3):
            opt.zero_grad()
            loss = F.mse_loss(model(x), target)
            loss.backward()
            step()
            out[f"loss{i}"] = _c(loss)
        out.update(_params(model))
        names = {p: n for n, p in model.named_parameters()}
        for p, state in opt.state.items():
            for k, v in state.items():
                out[f"state.{names[p]}.{k}"] = _c(v) if isinstance(v, torch.Tensor) else v
        return out

    return run


def _opt_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))


def _loss_step(model: nn.Module, opt: torch.optim.Optimizer, step: Callable, seed: int) -> torch.Tensor:
    opt.zero_grad()
    loss = F.mse_loss(model(_randn(16, 8, seed=seed)), _randn(16, 4, seed=seed + 1))
    loss.backward()
    step()
    return _c(loss)


def _opt_state(model: nn.Module, opt: torch.optim.Optimizer, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = _params(model, prefix + "param.")
    names = {p: n for n, p in model.named_parameters()}
    for p, state in opt.state.items():
        for k, v in state.items():
            out[f"{prefix}state.{names[p]}.{k}"] = _c(v) if isinstance(v, torch.Tensor) else v
    return out


def opt_two_optimizers_interleaved(backend: str) -> dict:
    # Two models and optimizers of the same shapes: one graph. The second compile may hit the first's entry and
    # must then update its own parameters and state, not the first optimizer's.
    m1, m2 = _opt_model(40), _opt_model(41)
    o1, o2 = torch.optim.Adam(m1.parameters(), lr=0.01), torch.optim.Adam(m2.parameters(), lr=0.01)
    s1, s2 = torch.compile(o1.step, backend=backend), torch.compile(o2.step, backend=backend)
    out = {}
    for i in range(3):
        out[f"loss1.{i}"] = _loss_step(m1, o1, s1, seed=10 * i)
        out[f"loss2.{i}"] = _loss_step(m2, o2, s2, seed=10 * i + 5)
    return {**out, **_opt_state(m1, o1, "1."), **_opt_state(m2, o2, "2.")}


def opt_resume_from_state_dict(backend: str) -> dict:
    # A checkpoint reloaded mid-training replaces the state tensors the compiled step reads and writes.
    import copy

    model = _opt_model(42)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    step = torch.compile(opt.step, backend=backend)
    out = {f"loss{i}": _loss_step(model, opt, step, seed=i) for i in range(2)}
    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    out["loss_discarded"] = _loss_step(model, opt, step, seed=2)
    model.load_state_dict(saved_model)
    opt.load_state_dict(saved_opt)
    out.update({f"loss_resumed{i}": _loss_step(model, opt, step, seed=2 + i) for i in range(2)})
    return {**out, **_opt_state(model, opt, "")}


def opt_param_groups(backend: str) -> dict:
    model = _opt_model(43)
    opt = torch.optim.AdamW(
        [
            {"params": model[0].parameters(), "lr": 0.02, "weight_decay": 0.0},
            {"params": model[2].parameters(), "lr": 0.005, "weight_decay": 0.1},
        ]
    )
    step = torch.compile(opt.step, backend=backend)
    out = {f"loss{i}": _loss_step(model, opt, step, seed=i) for i in range(3)}
    return {**out, **_opt_state(model, opt, "")}


def opt_sgd_foreach_off(backend: str) -> dict:
    model = _opt_model(44)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5, foreach=False)
    step = torch.compile(opt.step, backend=backend)
    out = {f"loss{i}": _loss_step(model, opt, step, seed=i) for i in range(3)}
    return {**out, **_opt_state(model, opt, "")}


def opt_flat_param_views(backend: str) -> dict:
    # Parameters that are views of one flat buffer (as FSDP/DeepSpeed flatten them): the step's state shares a
    # storage (documented bypass aliased_state); parameters must still be updated as with inductor.
    model = _opt_model(45)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    offset = 0
    for module in (model[0], model[2]):
        for name, p in list(module.named_parameters(recurse=False)):
            n = p.numel()
            setattr(module, name, nn.Parameter(flat[offset : offset + n].view_as(p)))
            offset += n
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = torch.compile(opt.step, backend=backend)
    out = {f"loss{i}": _loss_step(model, opt, step, seed=i) for i in range(3)}
    return {**out, **_opt_state(model, opt, ""), "flat": _c(flat)}


# ---- input mutation and aliasing -----------------------------------------------------------------------------
def mutate_input_inplace(backend: str) -> dict:
    def f(x, y):
        x.add_(y)
        return x * 2

    g = torch.compile(f, backend=backend)
    x, y = _randn(4, 4, seed=0), _randn(4, 4, seed=1)
    out = {"y0": g(x, y)}
    out["y1"] = g(x, y)
    out["x"] = x
    return out


def mutate_view_of_input(backend: str) -> dict:
    def f(x):
        x[1:3].mul_(3)
        x.t()[0].add_(1)
        return x.sum(0)

    g = torch.compile(f, backend=backend)
    x = _randn(4, 5, seed=0)
    y = g(x)
    return {"y": y, "x": x}


def mutate_input_that_is_a_view(backend: str) -> dict:
    def f(x):
        x.mul_(2).add_(1)
        return x.sum()

    g = torch.compile(f, backend=backend)
    base = _randn(6, 4, seed=0)
    out = {"s0": g(base[::2])}  # a strided view of base: base must see the update
    out["s1"] = g(base[1::2])
    out["base"] = base
    return out


def _alias_fn(a, b):
    a.add_(1)
    return a + b


def _alias_overlap(g) -> dict:
    base = torch.arange(10.0)
    y = g(base[0:6], base[3:9])  # a and b overlap: the update of a is visible through b
    return {"overlap.y": y, "overlap.base": base}


def _alias_separate(g) -> dict:
    base1, base2 = torch.arange(10.0), torch.arange(10.0)
    y = g(base1[0:6], base2[3:9])  # same sizes, strides and offsets, two storages
    return {"separate.y": y, "separate.base1": base1, "separate.base2": base2}


# Dynamo installs no guard on how two inputs overlap: in one Dynamo session the second call reuses the first call's
# code, and backend="inductor" itself returns a wrong result. torch._dynamo.reset() between the calls makes the second
# call compile again, as a new process would; the cache must then not serve the first call's entry.
def alias_overlap_then_separate(backend: str) -> dict:
    out = _alias_overlap(torch.compile(_alias_fn, backend=backend))
    torch._dynamo.reset()
    return {**out, **_alias_separate(torch.compile(_alias_fn, backend=backend))}


def alias_separate_then_overlap(backend: str) -> dict:
    out = _alias_separate(torch.compile(_alias_fn, backend=backend))
    torch._dynamo.reset()
    return {**out, **_alias_overlap(torch.compile(_alias_fn, backend=backend))}


def alias_overlap_dynamic(backend: str) -> dict:
    # Overlapping views with symbolic sizes: a symbolic graph whose inputs share a storage (documented bypass),
    # then two storages (cacheable). Read-only: with `a.add_(1)` torch 2.13's own code for the synthetic base
    # raises (NameError: name 's52' is not defined) under backend="inductor".
    def views(bases: list[torch.Tensor], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = bases[0][0:n], bases[-1][3 : 3 + n]
        torch._dynamo.mark_dynamic(a, 0)
        torch._dynamo.mark_dynamic(b, 0)
        return a, b

    out = {}
    for label, count in (("overlap", 1), ("separate", 2)):
        torch._dynamo.reset()
        g = torch.compile(lambda a, b: (a * 2 + b).cumsum(0), backend=backend)
        for n in (6, 7):
            bases = [torch.arange(12.0) for _ in range(count)]
            out[f"{label}.y{n}"] = g(*views(bases, n))
            out[f"{label}.bases{n}"] = bases
    return out


def alias_same_tensor_twice(backend: str) -> dict:
    def f(x, y):
        x.mul_(2)
        return x + y

    g = torch.compile(f, backend=backend)
    t = torch.arange(6.0)
    same = g(t, t)  # y is x: sees the doubling
    u, v = torch.arange(6.0), torch.arange(6.0)
    other = g(u, v)
    return {"same": same, "t": t, "other": other, "u": u, "v": v}


def batchnorm_train_buffers(backend: str) -> dict:
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    f = torch.compile(model, backend=backend)
    out = _train_steps(model, f, [_randn(8, 8, seed=i) for i in range(2)])
    bn = model[1]
    out.update(running_mean=_c(bn.running_mean), running_var=_c(bn.running_var))
    out["num_batches_tracked"] = int(bn.num_batches_tracked)
    model.eval()
    with torch.no_grad():
        out["eval"] = f(_randn(8, 8, seed=9))
    return out


# ---- RNG ----------------------------------------------------------------------------------------------------------
def rng_dropout_train(backend: str) -> dict:
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4))
    f = torch.compile(model, backend=backend)
    torch.manual_seed(1234)
    return _train_steps(model, f, [_randn(8, 16, seed=i) for i in range(2)])


def rng_random_ops(backend: str) -> dict:
    def f(x):
        return x + torch.rand_like(x), torch.randn(3, 4) * x.sum(), torch.randint(0, 10, (5,))

    g = torch.compile(f, backend=backend)
    torch.manual_seed(99)
    a, b, c = g(_randn(3, 4, seed=0))
    a2, b2, c2 = g(_randn(3, 4, seed=1))
    return {"a": a, "b": b, "c": c, "a2": a2, "b2": b2, "c2": c2}


# ---- autocast, layouts and dtypes ---------------------------------------------------------------------------------
def autocast_bf16_train(backend: str) -> dict:
    torch.manual_seed(9)
    model = _mlp(16, 32, 8)
    f = torch.compile(model, backend=backend)
    x = _randn(8, 16, seed=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = f(x)
    y.float().square().mean().backward()
    return {"y": _c(y), **_grads(model)}


def channels_last_conv(backend: str) -> dict:
    torch.manual_seed(10)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3)).to(
        memory_format=torch.channels_last
    )
    f = torch.compile(model, backend=backend)
    x = _randn(2, 3, 8, 8, seed=0).contiguous(memory_format=torch.channels_last)
    y = f(x)
    y.sum().backward()
    return {
        "y": _c(y),
        "y_channels_last": y.is_contiguous(memory_format=torch.channels_last),
        **_grads(model),
    }


def float64_train(backend: str) -> dict:
    torch.manual_seed(11)
    model = _mlp().double()
    f = torch.compile(model, backend=backend)
    return _train_steps(model, f, [_randn(6, 8, seed=0, dtype=torch.float64)])


def bfloat16_train(backend: str) -> dict:
    torch.manual_seed(12)
    model = _mlp().bfloat16()
    f = torch.compile(model, backend=backend)
    return _train_steps(model, f, [_randn(6, 8, seed=0, dtype=torch.bfloat16)])


def int64_inputs(backend: str) -> dict:
    torch.manual_seed(13)
    emb = nn.Embedding(20, 8)

    def f(idx, table):
        h = emb(idx)
        picked = torch.gather(table, 1, idx % 4)
        return h.sum(-1), idx * 3 + idx // 2 - picked, idx.max()

    g = torch.compile(f, backend=backend)
    idx = torch.randint(0, 20, (4, 6), generator=torch.Generator().manual_seed(1))
    table = torch.randint(-50, 50, (4, 4), generator=torch.Generator().manual_seed(2))
    with _deterministic():
        h, ints, top = g(idx, table)
        h.sum().backward()
    return {"h": _c(h), "ints": ints, "max": top, "grad.emb": _c(emb.weight.grad)}


def bool_masks(backend: str) -> dict:
    def f(x, mask):
        y = x.masked_fill(mask, 0.0) + torch.where(mask, x, -x)
        return y, mask.logical_not() & (x > 0), mask.any(1)

    g = torch.compile(f, backend=backend)
    x = _randn(5, 6, seed=0)
    mask = _randn(5, 6, seed=1) > 0.3
    y, m, a = g(x, mask)
    return {"y": y, "m": m, "any": a}


# ---- non-tensor outputs ---------------------------------------------------------------------------------------------
def returns_ints_and_none(backend: str) -> dict:
    def f(x):
        return x * 2, None, 3, x.shape[0] * 2, (x.sum(), None)

    g = torch.compile(f, backend=backend)
    a, none, three, n, (s, none2) = g(_randn(5, 3, seed=0))
    return {"a": a, "none_is_none": none is None and none2 is None, "three": three, "n": n, "s": s}


def returns_dict(backend: str) -> dict:
    def f(x):
        return {"double": x * 2, "stats": [x.mean(), x.std(), 7], "name": "ok", "nested": {"max": x.amax(0)}}

    g = torch.compile(f, backend=backend)
    r = g(_randn(5, 3, seed=0))
    return {
        "double": r["double"],
        "stats": list(r["stats"]),
        "name_ok": r["name"] == "ok",
        "max": r["nested"]["max"],
        "keys": sorted(r),
    }


def returns_item_with_graph_break(backend: str) -> dict:
    def f(x):
        s = x.sum().item()  # a graph break without capture_scalar_outputs
        return x * s, s

    g = torch.compile(f, backend=backend)
    y, s = g(_randn(4, 4, seed=0))
    return {"y": y, "s": s}


# ---- recompiles of one function -----------------------------------------------------------------------------------
def train_then_inference(backend: str) -> dict:
    torch.manual_seed(14)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    out = _train_steps(model, f, [_randn(8, 8, seed=0)])
    model.eval()
    with torch.no_grad():
        out["inference"] = f(_randn(8, 8, seed=1))
    with torch.inference_mode():
        out["inference_mode"] = _c(f(_randn(8, 8, seed=2)))
    return out


def recompile_dtype_and_requires_grad(backend: str) -> dict:
    def f(x):
        return (x.sin() * 3).sum(0)

    g = torch.compile(f, backend=backend)
    out = {"f32": g(_randn(4, 4, seed=0)), "f64": g(_randn(4, 4, seed=0, dtype=torch.float64))}
    x = _randn(4, 4, seed=0, grad=True)
    y = g(x)
    y.sum().backward()
    out.update(grad_y=_c(y), grad_x=_c(x.grad))
    return out


def same_graph_two_functions(backend: str) -> dict:
    # Two functions, different names and locals, the same graph: the second compile may hit the first's entry.
    def first(a):
        return (a * 2 + 1).relu()

    def second(value):
        return (value * 2 + 1).relu()

    x = _randn(6, 6, seed=0)
    return {"first": torch.compile(first, backend=backend)(x), "second": torch.compile(second, backend=backend)(-x)}


def closure_scalar_constants(backend: str) -> dict:
    # Closed-over floats are constants baked into each graph: 2.0 and 3.0 must not share an entry.
    def make(c):
        return lambda x: x * c + 1

    x = _randn(4, 4, seed=0)
    out = {}
    for c in (2.0, 3.0, 2.5):
        torch._dynamo.reset()  # a fresh compile of each closure (no automatic dynamic between them)
        out[f"c{c}"] = torch.compile(make(c), backend=backend)(x)
    return out


def dyn_automatic_python_float(backend: str) -> dict:
    # A float argument that changes between calls becomes a 0-d float64 tensor input of the recompiled graph.
    def f(x, c):
        return x * c + 1

    g = torch.compile(f, backend=backend)
    x = _randn(4, 4, seed=0)
    return {f"y{c}": g(x, c) for c in (2.0, 3.0, 2.5, -1.25)}


def dyn_python_float_returned(backend: str) -> dict:
    # The same, returning a float computed from the argument: the graph computes a symbolic float (`item`).
    def f(x, c):
        return x * c + 1, c * 2

    g = torch.compile(f, backend=backend)
    x = _randn(4, 4, seed=0)
    out = {}
    for c in (2.0, 3.0, 2.5, -1.25):
        y, c2 = g(x, c)
        out[f"y{c}"], out[f"c{c}"] = y, c2
    return out


def dyn_float_guarded_in_code(backend: str) -> dict:
    # A symbolic float the traced code branches on: Dynamo guards its sign (keyed with the graph), the compile adds
    # no guard of its own, so one entry serves every positive value.
    def f(x, c):
        if c > 0:
            return x * c + 1
        return x - c

    g = torch.compile(f, backend=backend)
    x = _randn(4, 4, seed=0)
    return {f"y{c}": g(x, c) for c in (2.0, 3.0, -1.5, 2.5, -0.5)}


def dyn_float_in_size(backend: str) -> dict:
    # A float that decides a size (interpolate's scale_factor): Inductor's tensorify pass cannot keep it symbolic and
    # restarts Dynamo with it specialized; the restart is recorded cold and replayed warm.
    def f(x, s):
        return F.interpolate(x, scale_factor=s, mode="nearest") * 2

    g = torch.compile(f, backend=backend)
    x = _randn(1, 2, 8, seed=0)
    return {f"y{s}": g(x, s) for s in (2.0, 3.0, 1.5)}


def closure_tensor_values(backend: str) -> dict:
    # Closed-over tensors of one shape but different values: inputs of the graph, or constants by content.
    def make(w):
        return lambda x: (x @ w).relu()

    x = _randn(4, 4, seed=0)
    out = {}
    for i in (1, 2):
        torch._dynamo.reset()
        out[f"w{i}"] = torch.compile(make(torch.full((4, 4), float(i))), backend=backend)(x)
    return out


def module_attribute_changes(backend: str) -> dict:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = 2

        def forward(self, x):
            return self.lin(x) * self.scale

    torch.manual_seed(15)
    m = Scaled()
    f = torch.compile(m, backend=backend)
    x = _randn(3, 4, seed=0)
    out = {}
    with torch.no_grad():
        for s in (2, 3, 2):
            m.scale = s
            out[f"s{s}"] = f(x)
        m.lin.weight.mul_(0.5)  # updated weights must be used
        out["after_update"] = f(x)
    return out


def graph_break_static(backend: str) -> dict:
    def f(x):
        y = x.exp()
        print("", end="")  # a graph break: two graphs
        return (y * 3).log_softmax(-1)

    g = torch.compile(f, backend=backend)
    x = _randn(4, 5, seed=0, grad=True)
    y = g(x)
    y.sum().backward()
    return {"y": _c(y), "gx": _c(x.grad)}


def grad_checkpoint_in_model(backend: str) -> dict:
    torch.manual_seed(16)
    block = _mlp(8, 16, 8)

    def f(x):
        return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False).relu().sum(1)

    g = torch.compile(f, backend=backend)
    x = _randn(4, 8, seed=0, grad=True)
    y = g(x)
    y.sum().backward()
    return {"y": _c(y), "gx": _c(x.grad), **_grads(block)}


def dyn_mark_unbacked(backend: str) -> dict:
    def f(x):
        return x.cos() * 2 + x.sum(0)

    g = torch.compile(f, backend=backend)
    out = {}
    for n in (6, 9):
        x = _randn(n, 4, seed=n)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        out[f"y{n}"] = g(x)
    return out


def dyn_cond_shape_predicate(backend: str) -> dict:
    def f(x):
        return torch.cond(x.shape[0] > 4, lambda t: t.sin() * 2, lambda t: t.cos() - 1, (x,))

    g = torch.compile(f, backend=backend)
    out = {}
    for n in (3, 6, 8):
        x = _randn(n, 4, seed=n)
        torch._dynamo.mark_dynamic(x, 0)
        out[f"y{n}"] = g(x)
    return out


def zero_size_input(backend: str) -> dict:
    def f(x):
        return x.sum(0) + x.shape[0], x.mean(0)

    g = torch.compile(f, backend=backend)
    out = {}
    for i, n in enumerate((0, 3, 0, 5)):
        out[f"sum{i}"], out[f"mean{i}"] = g(_randn(n, 4, seed=n))
    return out


def static_forced_recompiles(backend: str) -> dict:
    g = torch.compile(lambda x: x.softmax(0) * x.shape[0], backend=backend, dynamic=False)
    return {f"y{i}": g(_randn(n, 3, seed=n)) for i, n in enumerate((3, 4, 5, 3))}


def input_strides_change(backend: str) -> dict:
    def f(x):
        return (x * 2).cumsum(1)

    g = torch.compile(f, backend=backend)
    row_major, col_major = _randn(4, 5, seed=0), _randn(5, 4, seed=1).t()
    return {"row": g(row_major), "col": g(col_major), "row_again": g(row_major + 1)}


def output_aliases_input(backend: str) -> dict:
    # Outputs that are views of the input must stay views: a later in-place update of the input shows through.
    def f(x):
        return x.view(-1)[:4], x.t(), x * 2

    g = torch.compile(f, backend=backend)
    x = _randn(3, 4, seed=0)
    head, t, y = g(x)
    x.add_(1)
    return {"head": _c(head), "t": _c(t), "y": y, "head_shares_storage": head.data_ptr() == x.data_ptr()}


def two_models_same_arch(backend: str) -> dict:
    # Two instances, other weights, one graph: the second compile may hit the first's entry; weights are live.
    torch.manual_seed(20)
    m1, m2 = _mlp(), _mlp()
    out = _train_steps(m1, torch.compile(m1, backend=backend), [_randn(4, 8, seed=0)])
    second = _train_steps(m2, torch.compile(m2, backend=backend), [_randn(4, 8, seed=0)])
    return {**out, **{"m2." + k: v for k, v in second.items()}}


def frozen_layers_finetune(backend: str) -> dict:
    torch.manual_seed(21)
    model = _mlp()
    model[0].requires_grad_(False)
    f = torch.compile(model, backend=backend)
    return _train_steps(model, f, [_randn(4, 8, seed=i) for i in range(2)])


def varargs_list_inputs(backend: str) -> dict:
    def f(xs):
        return sum(x.sin() * i for i, x in enumerate(xs))

    g = torch.compile(f, backend=backend)
    return {f"n{n}": g([_randn(3, 3, seed=i) for i in range(n)]) for n in (2, 3, 2)}


def vmap_in_graph(backend: str) -> dict:
    w = _randn(8, 8, seed=3)

    def f(x):
        return torch.vmap(lambda r: (r @ w).sin())(x).sum(0)

    return {"y": torch.compile(f, backend=backend)(_randn(5, 8, seed=0))}


def complex_inputs(backend: str) -> dict:
    def f(z):
        return (z * (1 + 2j)).abs() + torch.view_as_real(z).sum(-1), z.conj() * 2

    z = torch.complex(_randn(4, 3, seed=0), _randn(4, 3, seed=1))
    a, b = torch.compile(f, backend=backend)(z)
    return {"a": a, "b": b.resolve_conj()}


def freezing_inference(backend: str) -> dict:
    torch.manual_seed(22)
    model = _mlp().eval()
    f = torch.compile(model, backend=backend, options={"freezing": True})
    with torch.no_grad():
        return {"y": f(_randn(4, 8, seed=0)), "y2": f(_randn(4, 8, seed=1))}


def _head(x):
    return x[:5].sum(0) * x.shape[0]  # the same graph for every size; guards 5 <= s0 or s0 < 5


def dyn_guard_candidates_after_reset(backend: str) -> dict:
    # One graph, two guarded candidates: each Dynamo session (reset = as in a new process) must pick the candidate
    # whose guards hold for its sizes, or compile a new one.
    out = {}
    for session, sizes in enumerate(((8,), (3,), (9, 4), (2, 12))):
        torch._dynamo.reset()
        f = torch.compile(_head, backend=backend)
        for n in sizes:
            x = _randn(n, 4, seed=n)
            torch._dynamo.mark_dynamic(x, 0)
            out[f"s{session}.n{n}"] = f(x)
    return out


def dyn_bounds_after_reset(backend: str) -> dict:
    # A candidate compiled under mark_dynamic(max=16) must not serve a session that declares max=64 (Dynamo
    # raises when installed guards narrow a declared range), nor an unbounded one.
    def f(x):
        return (x.cumsum(0) * x.shape[0]).mean(1)

    out = {}
    for session, (n, bounds) in enumerate(((8, (2, 16)), (40, (2, 64)), (20, None), (12, (2, 16)))):
        torch._dynamo.reset()
        g = torch.compile(f, backend=backend)
        x = _randn(n, 4, seed=n)
        if bounds:
            torch._dynamo.mark_dynamic(x, 0, min=bounds[0], max=bounds[1])
        else:
            torch._dynamo.mark_dynamic(x, 0)
        out[f"s{session}"] = g(x)
    return out


def _scheduled_steps(backend: str, seed: int, make_opt: Callable, make_sched: Callable, steps: int) -> dict:
    """Training steps with a compiled optimizer step and an LR scheduler stepping after each."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    step = torch.compile(opt.step, backend=backend)
    x, target = _randn(16, 8, seed=1), _randn(16, 4, seed=2)
    out: dict[str, Any] = {}
    for i in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        step()
        sched.step()
        out[f"loss{i}"] = _c(loss)
    out.update(_params(model))
    return out


def _lr_scheduler_case(tensor_lr: bool) -> Callable[[str], dict]:
    def run(backend: str) -> dict:
        return _scheduled_steps(
            backend,
            23,
            lambda p: torch.optim.Adam(p, lr=torch.tensor(0.01) if tensor_lr else 0.01),
            lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5**s),
            4,
        )

    return run


def opt_adamw_cosine_schedule(backend: str) -> dict:
    # nanoGPT's loop: AdamW with weight decay, a cosine LR schedule, a compiled step. The learning rate becomes a
    # symbolic float (with `1 - lr * weight_decay` computed from it) from the second step on.
    return _scheduled_steps(
        backend,
        29,
        lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
        lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
        5,
    )


def module_forward_hook(backend: str) -> dict:
    torch.manual_seed(24)
    model = _mlp()
    model[0].register_forward_hook(lambda mod, args, output: output * 0.5)
    model[2].register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    f = torch.compile(model, backend=backend)
    return _train_steps(model, f, [_randn(4, 8, seed=0)])


def threaded_calls(backend: str) -> dict:
    import threading

    f1 = torch.compile(lambda x: x.sin() + 1, backend=backend)
    f2 = torch.compile(lambda x: (x.cos() * 2).cumsum(0), backend=backend)
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def call(name: str, f: Callable, x: torch.Tensor) -> None:
        try:
            results[name] = f(x)
        except BaseException as e:  # re-raised in the case's thread below
            errors.append(e)

    threads = [
        threading.Thread(target=call, args=("a", f1, _randn(4, 4, seed=0))),
        threading.Thread(target=call, args=("b", f2, _randn(5, 3, seed=1))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return dict(sorted(results.items()))


def parameter_replaced(backend: str) -> dict:
    torch.manual_seed(28)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    x = _randn(4, 8, seed=0)
    out = {}
    with torch.no_grad():
        out["before"] = f(x)
        model[2].weight = nn.Parameter(torch.full_like(model[2].weight, 0.25))
        out["after"] = f(x)
    return out


def returns_input_itself(backend: str) -> dict:
    def f(x, y):
        return x, y * 2, y

    g = torch.compile(f, backend=backend)
    x, y = _randn(3, 3, seed=0), _randn(3, 3, seed=1)
    a, b, c = g(x, y)
    return {"a": a, "b": b, "c": c, "a_is_x": a is x, "c_is_y": c is y}


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.mid = nn.Linear(8, 8)
        self.out = nn.Linear(8, 16, bias=False)
        self.out.weight = self.emb.weight  # one parameter used twice

    def forward(self, idx):
        return self.out(torch.tanh(self.mid(self.emb(idx))))


def tied_weights_train(backend: str) -> dict:
    torch.manual_seed(25)
    model = _Tied()
    f = torch.compile(model, backend=backend)
    idx = torch.randint(0, 16, (4, 5), generator=torch.Generator().manual_seed(1))
    with _deterministic():
        out = _train_steps(model, f, [idx, idx.flip(0)])
    return out


class _Ema(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("ema", torch.zeros(6))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            self.ema.mul_(0.9).add_(0.1 * y.mean(0))
        return y - self.ema


def ema_buffer_update_in_forward(backend: str) -> dict:
    torch.manual_seed(26)
    model = _Ema()
    f = torch.compile(model, backend=backend)
    out = _train_steps(model, f, [_randn(4, 6, seed=i) for i in range(3)])
    out["ema"] = _c(model.ema)
    return out


def two_option_sets_one_process(backend: str) -> dict:
    def f(x):
        return (x @ x.t()).relu().sum(1) + x.sin().sum(1)

    x = _randn(6, 6, seed=0)
    out = {"default": torch.compile(f, backend=backend)(x)}
    torch._dynamo.reset()
    out["no_fusion"] = torch.compile(f, backend=backend, options={"epilogue_fusion": False})(x)
    torch._dynamo.reset()
    out["scalar_cpp"] = torch.compile(f, backend=backend, options={"cpp.simdlen": 1})(x)
    return out


def uint8_image_normalize(backend: str) -> dict:
    def f(img):
        x = img.float() / 255.0
        return (x - 0.5) / 0.25, img.max(), (img > 128).sum()

    img = torch.randint(0, 256, (2, 3, 6, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    a, b, c = torch.compile(f, backend=backend)(img)
    return {"norm": a, "max": b, "bright": c}


def float16_inference(backend: str) -> dict:
    torch.manual_seed(27)
    model = _mlp().half().eval()
    with torch.no_grad():
        return {"y": torch.compile(model, backend=backend)(_randn(4, 8, seed=0, dtype=torch.float16))}


class _Tagged(torch.Tensor):
    pass


def tensor_subclass_input(backend: str) -> dict:
    x = _randn(4, 4, seed=0).as_subclass(_Tagged)
    y = torch.compile(lambda t: t.sin() * 2 + 1, backend=backend)(x)
    return {"y": torch.Tensor(y).clone(), "subclass_kept": type(y) is _Tagged}


def expanded_stride0_input(backend: str) -> dict:
    def f(x, y):
        return (x * y).cumsum(1), x.sum(0)

    col = _randn(4, 1, seed=0).expand(4, 6)  # stride (1, 0)
    a, b = torch.compile(f, backend=backend)(col, _randn(4, 6, seed=1))
    return {"a": a, "b": b}


def default_dtype_switch(backend: str) -> dict:
    # torch.ones(3) in the graph has no dtype argument: the default dtype decides it.
    def f(x):
        return x + torch.ones(3) * 0.1

    out = {}
    for dtype in (torch.float32, torch.float64, torch.float32):
        torch._dynamo.reset()
        torch.set_default_dtype(dtype)
        try:
            out[str(dtype) + str(len(out))] = torch.compile(f, backend=backend)(torch.zeros(3, dtype=torch.float32))
        finally:
            torch.set_default_dtype(torch.float32)
    return out


def config_fallback_random_switch(backend: str) -> dict:
    # Inductor's own RNG, then fallback_random (eager's RNG): the Inductor config must separate the two.
    def f(x):
        return F.dropout(x, 0.5, training=True) + torch.rand_like(x)

    x = _randn(4, 8, seed=0)
    out = {}
    for fallback in (False, True, False):
        torch._dynamo.reset()
        with torch._inductor.config.patch(fallback_random=fallback):
            torch.manual_seed(5)
            out[f"fallback_{fallback}_{len(out)}"] = torch.compile(f, backend=backend)(x)
    return out


def model_recreated_same_id(backend: str) -> dict:
    # Models created and dropped in a loop: Python reuses their ids; nothing may be remembered by id.
    import gc

    out = {}
    for i, hidden in enumerate((16, 32, 16)):
        torch._dynamo.reset()
        torch.manual_seed(30 + i)
        model = _mlp(8, hidden, 4)
        with torch.no_grad():
            out[f"y{i}"] = torch.compile(model, backend=backend)(_randn(4, 8, seed=0))
        del model
        gc.collect()
    return out


# ---- Hugging Face -------------------------------------------------------------------------------------------------
def hf_gpt2_generate(backend: str) -> dict:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    torch.manual_seed(17)
    cfg = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=100,
        n_positions=64,
        initializer_range=0.3,
        bos_token_id=0,
        eos_token_id=1,
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.forward = torch.compile(model.forward, backend=backend)
    ids = torch.randint(2, 100, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        tokens = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False, pad_token_id=0
        )
    return {"tokens": tokens}


def hf_gpt2_generate_static_cache(backend: str) -> dict:
    # A static KV cache: the compiled forward updates the cache tensors in place (input mutation), static shapes.
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    torch.manual_seed(19)
    cfg = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=100,
        n_positions=64,
        initializer_range=0.3,
        bos_token_id=0,
        eos_token_id=1,
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.forward = torch.compile(model.forward, backend=backend)
    ids = torch.randint(2, 100, (2, 5), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        tokens = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=8,
            do_sample=False,
            pad_token_id=0,
            cache_implementation="static",
        )
    return {"tokens": tokens}


def hf_llama_train_step(backend: str) -> dict:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    torch.manual_seed(18)
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(cfg).train()
    f = torch.compile(model, backend=backend)
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(4))
    with _deterministic():
        out = f(input_ids=ids, labels=ids)
        out.loss.backward()
    return {"loss": _c(out.loss), "logits": _c(out.logits), **_grads(model)}


# ---- configuration and faults ---------------------------------------------------------------------------------------
def _two_graphs(backend: str) -> dict:
    torch.manual_seed(19)
    model = _mlp()
    f = torch.compile(model, backend=backend)
    out = _train_steps(model, f, [_randn(4, 8, seed=0)])
    g = torch.compile(lambda x: x.cos().cumsum(0), backend=backend)
    out["second"] = g(_randn(5, 3, seed=1))
    return out


def _store_facts(cache_dir: Path) -> dict:
    entries = entry_files(cache_dir)
    return {"fact.entries": len(entries), "fact.entry_bytes": sum(p.stat().st_size for p in entries)}


def cfg_max_size_5_bytes(backend: str) -> dict:
    d = case_cache_dir("cfg_max_size_5_bytes")
    with _configured(cache_dir=str(d), max_size=5):
        out = _two_graphs(backend)
    return {**out, **{k: v for k, v in _store_facts(d).items() if k == "fact.entries"}}


def cfg_max_size_env_5(backend: str) -> dict:
    d = case_cache_dir("cfg_max_size_env_5")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_MAX_SIZE="5"):
        out = _two_graphs(backend)
    return {**out, **{k: v for k, v in _store_facts(d).items() if k == "fact.entries"}}


def cfg_disable_malformed(backend: str) -> dict:
    d = case_cache_dir("cfg_disable_malformed")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_DISABLE="perhaps"):
        return _two_graphs(backend)


def cfg_max_size_malformed(backend: str) -> dict:
    d = case_cache_dir("cfg_max_size_malformed")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_MAX_SIZE="lots"):
        return _two_graphs(backend)


def cfg_disabled(backend: str) -> dict:
    with _env(AOTCACHE_DISABLE="1"):
        return _two_graphs(backend)


def cfg_unwritable_dir(backend: str) -> dict:
    root = case_cache_dir("cfg_unwritable_dir")
    root.mkdir(parents=True, exist_ok=True)
    blocker = root / "not-a-directory"
    blocker.write_text("a file where the cache directory's parent should be\n")
    with _configured(cache_dir=str(blocker / "cache")):
        return _two_graphs(backend)


def cfg_corrupt_entry(backend: str) -> dict:
    d = case_cache_dir("cfg_corrupt_entry")
    with _configured(cache_dir=str(d)):
        out = _two_graphs(backend)
    return out


def cfg_truncated_entry(backend: str) -> dict:
    d = case_cache_dir("cfg_truncated_entry")
    with _configured(cache_dir=str(d)):
        out = _two_graphs(backend)
    return out


def cfg_dir_switch(backend: str) -> dict:
    root = case_cache_dir("cfg_dir_switch")
    x = _randn(4, 4, seed=0)
    with _configured(cache_dir=str(root / "a")):
        a = torch.compile(lambda t: t.sin() + 1, backend=backend)(x)
    with _configured(cache_dir=str(root / "b b \u00e9")):  # spaces and a non-ASCII name
        b = torch.compile(lambda t: t.cos() * 3, backend=backend)(x)
    return {
        "a": a,
        "b": b,
        "fact.entries_a": len(entry_files(root / "a")),
        "fact.entries_b": len(entry_files(root / "b b \u00e9")),
    }


def cfg_salt_switch(backend: str) -> dict:
    d = case_cache_dir("cfg_salt_switch")
    x = _randn(4, 4, seed=0)
    out: dict[str, Any] = {}
    for salt in ("one", "two"):
        torch._dynamo.reset()
        with _configured(cache_dir=str(d), salt=salt):
            out[salt] = torch.compile(lambda t: t.tanh() * 2, backend=backend)(x)
    out["fact.entries"] = len(entry_files(d))
    return out


def cfg_remote_unreachable(backend: str) -> dict:
    d = case_cache_dir("cfg_remote_unreachable")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_REMOTE="redis://127.0.0.1:1/0", AOTCACHE_REMOTE_CONNECT_TIMEOUT_MS="200"):
        return _two_graphs(backend)


def cfg_signing_key(backend: str) -> dict:
    d = case_cache_dir("cfg_signing_key")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_SIGNING_KEY="k1:" + "s" * 32):
        return _two_graphs(backend)


def cfg_signing_key_malformed(backend: str) -> dict:
    d = case_cache_dir("cfg_signing_key_malformed")
    with _env(AOTCACHE_DIR=str(d), AOTCACHE_SIGNING_KEY="no-colon-here"):
        return _two_graphs(backend)


def cfg_deleted_entry(backend: str) -> dict:
    d = case_cache_dir("cfg_deleted_entry")
    with _configured(cache_dir=str(d)):
        return _two_graphs(backend)


def cfg_corrupt_symbolic_entry(backend: str) -> dict:
    d = case_cache_dir("cfg_corrupt_symbolic_entry")
    with _configured(cache_dir=str(d)):
        return dyn_shape_branch_automatic(backend)


# ---- the registry -------------------------------------------------------------------------------------------------
_OPT_TOL = (1e-6, 1e-5)
_BF16 = (2e-2, 2e-2)

CASES: list[Case] = [
    # dynamic shapes of every origin
    Case("dyn_mark_dynamic", dyn_mark_dynamic),
    Case("dyn_mark_dynamic_bounds", dyn_mark_dynamic_bounds),
    Case("dyn_automatic_sizes", dyn_automatic_sizes),
    Case("dyn_automatic_python_int", dyn_automatic_python_int),
    # Dynamo passes a changing float as a 0-d tensor and calls `item` on it: a symbolic float (tensorify.py). Generic
    # in the value; guarded on it by the compile (keyed by the value); guarded by the traced code; restarting.
    Case("dyn_automatic_python_float", dyn_automatic_python_float),
    Case("dyn_python_float_returned", dyn_python_float_returned),
    Case("dyn_float_guarded_in_code", dyn_float_guarded_in_code),
    Case("dyn_float_in_size", dyn_float_in_size),
    Case("dyn_mark_unbacked", dyn_mark_unbacked, ("bypass", "dynamic_shapes")),
    Case("dyn_cond_shape_predicate", dyn_cond_shape_predicate),
    Case("dyn_true_train", dyn_true_train),
    Case("dyn_true_graph_break", dyn_true_graph_break),
    Case("dyn_shape_branch_automatic", dyn_shape_branch_automatic),
    Case("dyn_shape_branch_dynamic_true", dyn_shape_branch_dynamic_true),
    Case("dyn_view_half", dyn_view_half),
    Case("dyn_cat_two_dynamic", dyn_cat_two_dynamic),
    Case("dyn_zero_one_then_mark", dyn_zero_one_then_mark),
    Case("dyn_two_dims_attention", dyn_two_dims_attention),
    Case("dyn_transposed_input", dyn_transposed_input),
    Case("dyn_reshape_fold", dyn_reshape_fold),
    Case("dyn_unbacked_nonzero", dyn_unbacked_nonzero, ("bypass", "dynamic_shapes")),
    Case("dyn_unbacked_item_int", dyn_unbacked_item_int, ("bypass", "dynamic_shapes")),
    Case("dyn_unbacked_item_float", dyn_unbacked_item_float, ("bypass", "dynamic_shapes")),
    # torch's backend="eager" raises on invoke_subgraph ("fake_mode should be enabled for HOPs")
    Case("dyn_nested_compile_region", dyn_nested_compile_region, eager_backend="aot_eager"),
    Case("dyn_layernorm_dynamic_true", dyn_layernorm_dynamic_true),
    Case("dyn_guard_candidates_after_reset", dyn_guard_candidates_after_reset),
    Case("dyn_bounds_after_reset", dyn_bounds_after_reset),
    # compiled optimizer steps
    Case("opt_sgd", _optimizer_case(lambda p: torch.optim.SGD(p, lr=0.1)), eager_tol=_OPT_TOL),
    Case(
        "opt_sgd_momentum",
        _optimizer_case(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
        eager_tol=_OPT_TOL,
    ),
    Case("opt_adam", _optimizer_case(lambda p: torch.optim.Adam(p, lr=0.01)), eager_tol=_OPT_TOL),
    Case("opt_adamw", _optimizer_case(lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)), eager_tol=_OPT_TOL),
    # a float lr that the scheduler changes: Dynamo's recompiled step computes a symbolic float (tensorify.py)
    Case("opt_adam_lr_scheduler", _lr_scheduler_case(tensor_lr=False), eager_tol=_OPT_TOL),
    Case("opt_adamw_cosine_schedule", opt_adamw_cosine_schedule, eager_tol=_OPT_TOL),
    Case("opt_adam_tensor_lr_scheduler", _lr_scheduler_case(tensor_lr=True), eager_tol=_OPT_TOL),
    Case("opt_two_optimizers_interleaved", opt_two_optimizers_interleaved, eager_tol=_OPT_TOL),
    Case("opt_resume_from_state_dict", opt_resume_from_state_dict, eager_tol=_OPT_TOL),
    Case("opt_param_groups", opt_param_groups, eager_tol=_OPT_TOL),
    Case("opt_sgd_foreach_off", opt_sgd_foreach_off, eager_tol=_OPT_TOL),
    Case("opt_flat_param_views", opt_flat_param_views, ("bypass", "aliased_state"), eager_tol=_OPT_TOL),
    # input mutation and aliasing
    Case("mutate_input_inplace", mutate_input_inplace),
    Case("mutate_view_of_input", mutate_view_of_input),
    Case("mutate_input_that_is_a_view", mutate_input_that_is_a_view),
    Case("alias_overlap_then_separate", alias_overlap_then_separate),
    Case("alias_separate_then_overlap", alias_separate_then_overlap),
    Case("alias_overlap_dynamic", alias_overlap_dynamic, ("bypass", "dynamic_shapes")),
    Case("alias_same_tensor_twice", alias_same_tensor_twice),
    Case("batchnorm_train_buffers", batchnorm_train_buffers),
    # RNG: Inductor draws from its own stream (seeded from torch's generator), not eager's
    Case("rng_dropout_train", rng_dropout_train, eager_tol=None),
    Case("rng_random_ops", rng_random_ops, eager_tol=None),
    # autocast, layouts, dtypes
    Case("autocast_bf16_train", autocast_bf16_train, eager_tol=_BF16),
    Case("channels_last_conv", channels_last_conv),
    Case("float64_train", float64_train, eager_tol=(1e-10, 1e-9)),
    Case("bfloat16_train", bfloat16_train, eager_tol=_BF16),
    Case("int64_inputs", int64_inputs),
    Case("bool_masks", bool_masks),
    # non-tensor outputs
    Case("returns_ints_and_none", returns_ints_and_none),
    Case("returns_dict", returns_dict),
    Case("returns_item_with_graph_break", returns_item_with_graph_break),
    # one function, several graphs; graphs shared by functions
    Case("train_then_inference", train_then_inference),
    Case("recompile_dtype_and_requires_grad", recompile_dtype_and_requires_grad),
    Case("same_graph_two_functions", same_graph_two_functions),
    Case("closure_scalar_constants", closure_scalar_constants),
    Case("closure_tensor_values", closure_tensor_values),
    Case("module_attribute_changes", module_attribute_changes),
    Case("graph_break_static", graph_break_static),
    Case("grad_checkpoint_in_model", grad_checkpoint_in_model),
    Case("zero_size_input", zero_size_input),
    Case("static_forced_recompiles", static_forced_recompiles),
    Case("input_strides_change", input_strides_change),
    Case("output_aliases_input", output_aliases_input),
    Case("two_models_same_arch", two_models_same_arch),
    Case("frozen_layers_finetune", frozen_layers_finetune),
    Case("varargs_list_inputs", varargs_list_inputs),
    Case("vmap_in_graph", vmap_in_graph),
    Case("complex_inputs", complex_inputs),
    Case("freezing_inference", freezing_inference, ("bypass", "freezing")),
    Case("module_forward_hook", module_forward_hook),
    Case("threaded_calls", threaded_calls),
    Case("returns_input_itself", returns_input_itself),
    Case("parameter_replaced", parameter_replaced),
    Case("tied_weights_train", tied_weights_train),
    Case("ema_buffer_update_in_forward", ema_buffer_update_in_forward),
    Case("two_option_sets_one_process", two_option_sets_one_process),
    Case("uint8_image_normalize", uint8_image_normalize),
    Case("float16_inference", float16_inference, eager_tol=(1e-2, 1e-2)),
    Case("tensor_subclass_input", tensor_subclass_input, ("bypass", "tensor_subclass")),
    Case("expanded_stride0_input", expanded_stride0_input),
    Case("default_dtype_switch", default_dtype_switch),
    Case("config_fallback_random_switch", config_fallback_random_switch, eager_tol=None),
    Case("model_recreated_same_id", model_recreated_same_id),
    # Hugging Face
    Case("hf_gpt2_generate", hf_gpt2_generate),
    Case("hf_gpt2_generate_static_cache", hf_gpt2_generate_static_cache),
    Case("hf_llama_train_step", hf_llama_train_step, eager_tol=(1e-4, 1e-3)),
    # configuration and faults
    Case("cfg_max_size_5_bytes", cfg_max_size_5_bytes, ("miss", "every entry is evicted"), facts={"fact.entries": 0}),
    Case("cfg_max_size_env_5", cfg_max_size_env_5, ("miss", "every entry is evicted"), facts={"fact.entries": 0}),
    Case("cfg_disable_malformed", cfg_disable_malformed, warning="AOTCACHE_DISABLE"),
    Case("cfg_max_size_malformed", cfg_max_size_malformed, warning="AOTCACHE_MAX_SIZE"),
    Case("cfg_disabled", cfg_disabled, ("bypass", "disabled")),
    Case("cfg_unwritable_dir", cfg_unwritable_dir, ("bypass", "store_unavailable"), warning="not-a-directory"),
    Case("cfg_corrupt_entry", cfg_corrupt_entry, ("error", "corrupt_entry"), damage="flip"),
    Case("cfg_truncated_entry", cfg_truncated_entry, ("error", "corrupt_entry"), damage="truncate"),
    Case("cfg_deleted_entry", cfg_deleted_entry, ("miss", "the entries were deleted"), damage="delete"),
    Case(
        "cfg_corrupt_symbolic_entry",
        cfg_corrupt_symbolic_entry,
        ("error", "corrupt_entry"),
        damage="flip",
        errors_ok=("guard_index",),
    ),
    Case("cfg_dir_switch", cfg_dir_switch, facts={"fact.entries_a": 1, "fact.entries_b": 1}),
    Case("cfg_salt_switch", cfg_salt_switch, facts={"fact.entries": 2}),
    Case("cfg_remote_unreachable", cfg_remote_unreachable, errors_ok=("remote",)),
    Case("cfg_signing_key", cfg_signing_key),
    Case(
        "cfg_signing_key_malformed",
        cfg_signing_key_malformed,
        ("bypass", "store_unavailable"),
        warning="AOTCACHE_SIGNING_KEY",
    ),
]

BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "duplicate case names"
