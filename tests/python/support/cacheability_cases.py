"""Cacheability cases with real models: higher-order ops, custom ops and Functions, nn modules.

Each case builds (function to compile, example inputs, whether to run a backward) for a variant: "a" is the base;
"b" changes only the implementation of the pinned code (a custom op's body, a Function's backward, a checkpoint
policy), which must miss. Run by cacheability_worker.py, one process per pass over all cases.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

import aotcache


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str], tuple[Callable, tuple, bool]]
    expect: str  # "hit", or "bypass:<reason code>" (compiled correctly, not cached)
    changes_in_b: bool = False  # variant "b" changes the pinned implementation: must miss
    direct: bool = False  # a GraphModule handed to the backend directly (nn modules are never inlined then)


def _weights(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(7), requires_grad=True)


def _x(*shape: int, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3), requires_grad=grad)


# ---- activation checkpointing ----------------------------------------------------------------------------------
def _checkpoint(variant: str):
    w = _weights(16, 16)
    return (
        (lambda x: checkpoint(lambda y: torch.sin(y @ w).relu() @ w, x, use_reentrant=False).sum(1)),
        (_x(8, 16),),
        True,
    )


def _policy_a(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


def _policy_b(ctx, op, *args, **kwargs):
    return CheckpointPolicy.PREFER_RECOMPUTE


def _sac(variant: str):
    w = _weights(16, 16)
    policy = _policy_a if variant == "a" else _policy_b
    context_fn = functools.partial(create_selective_checkpoint_contexts, policy)
    body = lambda y: torch.sin(y @ w).relu() @ w  # noqa: E731
    return (lambda x: checkpoint(body, x, use_reentrant=False, context_fn=context_fn)), (_x(8, 16),), True


class _Settings:  # a user object: its state is not pinned by value
    save_matmuls = True


_SETTINGS = _Settings()


def _opaque_policy(ctx, op, *args, **kwargs):
    if _SETTINGS.save_matmuls and op == torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _sac_unhashable(variant: str):
    w = _weights(16, 16)
    context_fn = functools.partial(create_selective_checkpoint_contexts, _opaque_policy)
    body = lambda y: torch.sin(y @ w).relu() @ w  # noqa: E731
    return (lambda x: checkpoint(body, x, use_reentrant=False, context_fn=context_fn)), (_x(8, 16),), True


# ---- control flow and subgraphs ----------------------------------------------------------------------------------
def _cond(variant: str):
    w = _weights(16, 16)
    return (
        (lambda x: torch.cond(x.sum() > 0, lambda y: (y @ w).sin(), lambda y: (y @ w).cos(), (x,))),
        (_x(8, 16, grad=False),),
        False,
    )


def _while_loop(variant: str):
    def fn(x):
        return torch._higher_order_ops.while_loop(
            lambda i, y: i < 3, lambda i, y: (i + 1, y * 2 + 1), (torch.tensor(0), x)
        )

    return fn, (_x(8, 16, grad=False),), False


@torch.compiler.nested_compile_region
def _block(y, w):
    return torch.sin(y @ w) * 2


def _invoke_subgraph(variant: str):
    w = _weights(16, 16)
    return (lambda x: _block(_block(x, w), w).sum(1)), (_x(8, 16),), True


def _flex_attention(variant: str):
    from torch.nn.attention.flex_attention import flex_attention

    def fn(q):
        return flex_attention(q, q, q, score_mod=lambda s, b, h, qi, ki: s + (qi - ki) * 0.1)

    return fn, (_x(1, 2, 16, 8, grad=False),), False


def _grad_mode_region(variant: str):
    def fn(x):
        with torch.no_grad():
            scale = x.abs().mean() + 1
        return (x * scale).sin().sum(1)

    return fn, (_x(8, 16),), True


def _autocast_region(variant: str):
    w = _weights(16, 16)

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
        return y.float().relu().sum(1)

    return fn, (_x(8, 16),), True


# ---- custom autograd.Function ----------------------------------------------------------------------------------
class _SinA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class _SinB(torch.autograd.Function):  # the same forward; a different (wrong on purpose) backward
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 2


def _autograd_function(variant: str):
    fn_class = _SinA if variant == "a" else _SinB
    return (lambda x: fn_class.apply(x * 2).sum(1)), (_x(8, 16),), True


# ---- custom ops ----------------------------------------------------------------------------------------------------
def _define_custom_op(variant: str):
    """A torch.library.custom_op, pinned by the digest of its implementation's source."""
    if variant == "a":

        @torch.library.custom_op("aotcache_test::scale_shift", mutates_args=())
        def scale_shift(x: torch.Tensor) -> torch.Tensor:
            return x * 2 + 1

    else:

        @torch.library.custom_op("aotcache_test::scale_shift", mutates_args=())
        def scale_shift(x: torch.Tensor) -> torch.Tensor:
            return x * 3 + 1

    scale_shift.register_fake(lambda x: torch.empty_like(x))
    return scale_shift


def _custom_op_digest(variant: str):
    op = _define_custom_op(variant)
    return (lambda x: op(x.relu()) + 1), (_x(8, 16, grad=False),), False


def _backward_times_2(ctx, grad):
    return grad * 2


def _backward_times_3(ctx, grad):  # variant b: a changed autograd formula (torch's own cache serves the old one)
    return grad * 3


def _custom_op_autograd(variant: str):
    @torch.library.custom_op("aotcache_test::doubled", mutates_args=())
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    doubled.register_fake(lambda x: torch.empty_like(x))
    doubled.register_autograd(_backward_times_2 if variant == "a" else _backward_times_3)
    return (lambda x: doubled(x).sin()), (_x(8, 16),), True


def _library_op(name: str, factor: float):
    """An op defined through torch.library.Library: its kernel is not reachable as source, only a version pins it."""
    lib = torch.library.Library("aotcache_test", "FRAGMENT")
    lib.define(f"{name}(Tensor x) -> Tensor")
    lib.impl(name, lambda x: x * factor, "CompositeExplicitAutograd")
    torch.library.register_fake(f"aotcache_test::{name}", lambda x: torch.empty_like(x), lib=lib)
    _LIBRARIES.append(lib)  # a Library deregisters its ops when collected
    return getattr(torch.ops.aotcache_test, name).default


_LIBRARIES: list = []


def _custom_op_registered(variant: str):
    op = _library_op("scale_v", 3.0 if variant == "a" else 4.0)
    aotcache.register_op_version("aotcache_test::scale_v", "1" if variant == "a" else "2")
    return (lambda x: op(x) - 1), (_x(8, 16, grad=False),), False


def _custom_op_unpinned(variant: str):
    op = _library_op("scale_u", 5.0)
    return (lambda x: op(x) - 1), (_x(8, 16, grad=False),), False


# ---- nn modules (call_module nodes: a GraphModule handed to the backend directly) ----------------------------------
def _builtin_modules(variant: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Dropout(0.0), torch.nn.Linear(32, 4)
    )
    return torch.fx.symbolic_trace(model), (_x(8, 16, grad=False),), False


class _UserBlock(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class _LeafTracer(torch.fx.Tracer):
    def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
        return isinstance(m, _UserBlock) or super().is_leaf_module(m, qualname)


def _user_module(variant: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), _UserBlock())
    graph = _LeafTracer().trace(model)
    return torch.fx.GraphModule(model, graph), (_x(8, 16, grad=False),), False


# ---- freezing ----------------------------------------------------------------------------------------------------
def _freezing(variant: str):
    w = _weights(16, 16).detach()
    return (lambda x: (x @ w).relu()), (_x(8, 16, grad=False),), False


CASES = [
    Case("checkpoint", _checkpoint, "hit"),
    Case("selective_checkpoint", _sac, "hit", changes_in_b=True),
    Case("selective_checkpoint_unhashable_policy", _sac_unhashable, "bypass:checkpoint_policy_unhashable"),
    Case("cond", _cond, "hit"),
    Case("while_loop", _while_loop, "hit"),
    Case("invoke_subgraph", _invoke_subgraph, "hit"),
    Case("flex_attention", _flex_attention, "hit"),
    Case("grad_mode_region", _grad_mode_region, "hit"),
    Case("autocast_region", _autocast_region, "hit"),
    Case("autograd_function", _autograd_function, "hit", changes_in_b=True),
    Case("custom_op_source_digest", _custom_op_digest, "hit", changes_in_b=True),
    Case("custom_op_autograd_formula", _custom_op_autograd, "hit", changes_in_b=True),
    Case("custom_op_registered_version", _custom_op_registered, "hit", changes_in_b=True),
    Case("custom_op_unpinned", _custom_op_unpinned, "bypass:custom_op_unpinned"),
    Case("builtin_nn_modules", _builtin_modules, "hit", direct=True),
    Case("user_nn_module", _user_module, "bypass:call_module_unknown_type", direct=True),
    Case("freezing", _freezing, "bypass:freezing"),
]

BY_NAME = {c.name: c for c in CASES}


def run_eager(built: tuple[Callable, tuple, bool]) -> list[torch.Tensor]:
    """The same computation without torch.compile, on copies of the inputs: the reference results."""
    fn, args, train = built
    if isinstance(fn, torch.fx.GraphModule):
        fn = fn.forward
    args = tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args)
    out = fn(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    results = [o.detach().clone() for o in outs]
    if train:
        sum(o.sum() for o in outs).backward()
        results += [a.grad.clone() for a in args if isinstance(a, torch.Tensor) and a.grad is not None]
    return results


def run_case(case: Case, built: tuple[Callable, tuple, bool], backend: str = "aotcache") -> list[torch.Tensor]:
    """Compiles and runs a built case through `backend` (aotcache, or inductor to compare with torch's own caches);
    returns its outputs (and input gradients when it trains)."""
    fn, args, train = built
    opts = {"freezing": True} if case.name == "freezing" else None
    if backend != "aotcache":
        compiled = torch.compile(fn, backend=backend, options=opts) if not case.direct else fn
    elif case.direct:
        compiled = aotcache.aotcache_backend(fn, list(args), options=opts)
    else:
        compiled = torch.compile(fn, backend="aotcache", fullgraph=True, options=opts)
    out = compiled(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    results = [o.detach().clone() for o in outs]
    if train:
        sum(o.sum() for o in outs).backward()
        results += [a.grad.clone() for a in args if isinstance(a, torch.Tensor) and a.grad is not None]
    return results
