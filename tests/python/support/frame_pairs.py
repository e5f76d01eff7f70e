"""Program pairs for the frame cache's soundness: A and B are the same source files, byte for byte, run in two
processes whose behaviour differs in something Dynamo notices while tracing (a rebound builtin, a patched method, a
default chosen at import, an environment variable read in compiled code, a global hook...).

A runs cold with `backend="aotcache"`; B runs warm on A's cache with the frame verifier on, and again under
uncached `backend="inductor"` (the reference). B warm must give the reference's results bit for bit, and the
verifier (every served frame traced again and compared) must find no difference. A frame served to B that A's
process recorded is exactly the false hit this suite hunts.

A pair is an operator (what differs between A and B: `OPERATORS`) applied in a base program (where the differing
thing is used: `BASES`), with two values. `attack_pairs()` is the fixed table (each operator once, in the base that
exercises it best, plus hand-written cases on real models); `generated_pairs(seed, n)` draws operator x base x
values from a seeded generator (`make fuzz-frames SEED=.. N=..`).

Each pair is one Python module (and, for most operators, a helper module beside it: code inlined from another
module, as a library's) written under one directory. The variant is read at import from the environment
(`AOTC_PAIR_VARIANT`, "A" or "B"), so the files never differ. Module API:
    setup() -> undo callable or None     process-wide changes (patches, hooks, environment), undone after the case
    run(backend) -> {name: tensor}       compile with `backend`, run, return what to compare
"""

from __future__ import annotations

import dataclasses
import random
import textwrap

PRELUDE = """\
import dataclasses
import enum
import functools
import math
import os

import torch
import torch.nn.functional as F

B = os.environ.get("AOTC_PAIR_VARIANT") == "B"
"""

# Value pairs (A, B) an operator's {a} / {b} take; each pair changes the result.
NUMBERS = [(2.0, 3.0), (0.5, -1.0), (1.5, 0.25), (-2.0, 4.0), (3.0, 1.0)]
TORCH_UNARY = [("relu", "sigmoid"), ("tanh", "sigmoid"), ("sin", "cos"), ("exp", "expm1"), ("abs", "neg")]
F_UNARY = [("gelu", "silu"), ("relu", "elu"), ("silu", "mish"), ("softsign", "tanhshrink")]
MODULES = [("ReLU", "tanh"), ("Tanh", "sigmoid"), ("GELU", "sin"), ("SiLU", "cos")]


@dataclasses.dataclass(frozen=True)
class Operator:
    """What differs between A and B. `lib` is the helper module's text (after the prelude), `defs` the main
    module's top-level definitions (the helper is imported as `lib`), `use` an expression of `h` (the value being
    computed) placed in the base program, `setup` the body of setup() (returns the undo callable), `values` the
    pool {a}/{b} (and {fa}/{fb}) are drawn from, `bases` where it applies (None: every base)."""

    name: str
    use: str
    lib: str = ""
    defs: str = ""
    setup: str = ""
    values: tuple = tuple(NUMBERS)
    bases: tuple | None = None
    note: str = ""
    observable: bool = True  # B's results differ from A's (a config that changes only how the code is made: not)
    zoo: bool = True  # applies in the zoo bases (not when it breaks a real model for the reference too)


def _undo_attr(obj: str, attr: str, new: str) -> str:
    return f"old = {obj}.{attr}\nif B:\n    {obj}.{attr} = {new}\nreturn lambda: setattr({obj}, {attr!r}, old)"


def _set_env(name: str) -> str:
    return (
        f"old = os.environ.get({name!r})\n"
        f"os.environ[{name!r}] = str({{b}} if B else {{a}})\n"
        f"def undo():\n"
        f"    if old is None:\n"
        f"        os.environ.pop({name!r}, None)\n"
        f"    else:\n"
        f"        os.environ[{name!r}] = old\n"
        f"return undo"
    )


def _hook(register: str, hook: str) -> str:
    return f"if not B:\n    return None\nhandle = torch.nn.modules.module.{register}({hook})\nreturn handle.remove"


OPERATORS: list[Operator] = [
    # 4. defaults and other modules' globals
    Operator("default_arg", "lib.act(h)", lib="K = {b} if B else {a}\ndef act(h, k=K):\n    return h * k"),
    Operator("kwonly_default", "lib.act(h)", lib="K = {b} if B else {a}\ndef act(h, *, k=K):\n    return h * k"),
    Operator(
        "defaults_patched",
        "lib.act(h)",
        lib="def act(h, k={a}):\n    return h * k",
        setup=_undo_attr("lib.act", "__defaults__", "({b},)"),
    ),
    Operator(
        "kwdefaults_patched",
        "lib.act(h)",
        lib="def act(h, *, k={a}):\n    return h * k",
        setup=_undo_attr("lib.act", "__kwdefaults__", "{{'k': {b}}}"),
    ),
    Operator(
        "closure_cell",
        "lib.ACT(h)",
        lib="def make(k):\n    def act(h):\n        return h * k\n    return act\nACT = make({b} if B else {a})",
    ),
    Operator(
        "closure_cell_set",
        "lib.ACT(h)",
        lib="def make(k):\n    def act(h):\n        return h * k\n    return act\nACT = make({a})",
        setup="cell = lib.ACT.__closure__[0]\nold = cell.cell_contents\nif B:\n    cell.cell_contents = {b}\n"
        "return lambda: setattr(cell, 'cell_contents', old)",
    ),
    Operator(
        "decorator_closure",
        "lib.act(h)",
        lib="def deco(s):\n    def wrap(fn):\n        @functools.wraps(fn)\n        def w(h):\n            return fn(h) * s\n"  # noqa: E501
        "        return w\n    return wrap\n@deco({b} if B else {a})\ndef act(h):\n    return torch.relu(h) + h",
    ),
    Operator("lib_global", "lib.act(h)", lib="K = {b} if B else {a}\ndef act(h):\n    return h * K"),
    Operator(
        "lib_global_patched",
        "lib.act(h)",
        lib="K = {a}\ndef act(h):\n    return h * K",
        setup=_undo_attr("lib", "K", "{b}"),
    ),
    Operator("main_global", "h * K", defs="K = {b} if B else {a}"),
    Operator("list_global", "h * lib.W[0]", lib="W = [{b}, 1.0] if B else [{a}, 1.0]"),
    Operator("dict_global", "h * lib.CFG['k']", lib="CFG = {{'k': {b} if B else {a}}}"),
    Operator(
        "string_branch",
        "lib.act(h)",
        lib="MODE = 'b' if B else 'a'\ndef act(h):\n    if MODE == 'a':\n        return torch.relu(h)\n    return torch.tanh(h)",  # noqa: E501
        values=((0, 0),),
    ),
    Operator("enum_value", "h * lib.Mode.X.value", lib="class Mode(enum.Enum):\n    X = {b} if B else {a}"),
    Operator(
        "dataclass_default",
        "h * lib.CFG.k",
        lib="@dataclasses.dataclass(frozen=True)\nclass Cfg:\n    k: float = {b} if B else {a}\nCFG = Cfg()",
    ),
    Operator(
        "code_replaced",
        "lib.act(h)",
        lib="def act(h):\n    return torch.relu(h)\ndef other(h):\n    return torch.tanh(h)",
        setup=_undo_attr("lib.act", "__code__", "lib.other.__code__"),
        values=((0, 0),),
    ),
    # 2. a builtin rebound under its public name
    Operator(
        "rebind_torch",
        "torch.{fa}(h)",
        setup=_undo_attr("torch", "{fa}", "torch.{fb}"),
        values=tuple(TORCH_UNARY),
    ),
    Operator(
        "rebind_torch_to_python",
        "torch.{fa}(h)",
        setup=_undo_attr("torch", "{fa}", "lambda t: t * 2.0"),
        values=tuple(TORCH_UNARY),
    ),
    Operator("rebind_functional", "F.{fa}(h)", setup=_undo_attr("F", "{fa}", "F.{fb}"), values=tuple(F_UNARY)),
    Operator(
        "rebind_functional_in_lib",
        "lib.act(h)",
        lib="def act(h):\n    return F.{fa}(h) + 1",
        setup=_undo_attr("F", "{fa}", "F.{fb}"),
        values=tuple(F_UNARY),
    ),
    Operator(
        "rebind_tensor_method",
        "h.{fa}()",
        setup=_undo_attr("torch.Tensor", "{fa}", "torch.Tensor.{fb}"),
        values=(("relu", "sigmoid"), ("tanh", "sigmoid"), ("sin", "cos")),
    ),
    Operator("rebind_math", "h * math.sqrt(4.0)", setup=_undo_attr("math", "sqrt", "math.exp"), values=((0, 0),)),
    Operator(
        "registry_of_builtins",
        "lib.ACTS['act'](h)",
        lib="ACTS = {{'act': torch.{fb} if B else torch.{fa}}}",
        values=tuple(TORCH_UNARY),
    ),
    Operator(
        "getattr_by_name",
        "getattr(torch, lib.NAME)(h)",
        lib="NAME = '{fb}' if B else '{fa}'",
        values=tuple(TORCH_UNARY),
    ),
    Operator(
        "partial_keyword",
        "lib.ACT(h)",
        lib="ACT = functools.partial(torch.clamp, min={b} if B else {a})",
    ),
    # 1. code reached through a class or a module attribute
    Operator(
        "class_method_patched",
        "ACT(h)",
        lib="class Act(torch.nn.Module):\n    def forward(self, h):\n        return torch.relu(h)\n"
        "def patched(self, h):\n    return torch.tanh(h)",
        defs="ACT = lib.Act()",
        setup=_undo_attr("lib.Act", "forward", "lib.patched"),
        values=((0, 0),),
    ),
    Operator(
        "torch_module_patched",
        "ACT(h)",
        defs="ACT = torch.nn.{fa}()",
        setup=_undo_attr("torch.nn.{fa}", "forward", "lambda self, t: torch.{fb}(t) * 2.0"),
        values=tuple(MODULES),
    ),
    Operator(
        "class_at_import",
        "ACT(h)",
        lib="if B:\n    class Act(torch.nn.Module):\n        def forward(self, h):\n            return torch.tanh(h)\n"
        "else:\n    class Act(torch.nn.Module):\n        def forward(self, h):\n            return torch.relu(h)",
        defs="ACT = lib.Act()",
        values=((0, 0),),
    ),
    Operator(
        "class_attr_at_import",
        "ACT(h)",
        lib="class Act(torch.nn.Module):\n    SCALE = {b} if B else {a}\n    def forward(self, h):\n"
        "        return h * self.SCALE",
        defs="ACT = lib.Act()",
    ),
    Operator(
        "class_attr_patched",
        "ACT(h)",
        lib="class Act(torch.nn.Module):\n    SCALE = {a}\n    def forward(self, h):\n        return h * self.SCALE",
        defs="ACT = lib.Act()",
        setup=_undo_attr("lib.Act", "SCALE", "{b}"),
    ),
    Operator(
        "class_function_attr",
        "ACT(h)",
        lib="class Act(torch.nn.Module):\n    fn = staticmethod(torch.{fb} if B else torch.{fa})\n"
        "    def forward(self, h):\n        return self.fn(h)",
        defs="ACT = lib.Act()",
        values=tuple(TORCH_UNARY),
    ),
    Operator(
        "staticmethod_patched",
        "lib.Ops.act(h)",
        lib="class Ops:\n    @staticmethod\n    def act(h):\n        return torch.relu(h)",
        setup=_undo_attr("lib.Ops", "act", "staticmethod(lambda h: torch.tanh(h))"),
        values=((0, 0),),
    ),
    Operator(
        "super_method_patched",
        "ACT(h)",
        lib="class Base(torch.nn.Module):\n    def act(self, h):\n        return torch.relu(h)\n"
        "class Act(Base):\n    def forward(self, h):\n        return super().act(h) + 1",
        defs="ACT = lib.Act()",
        setup=_undo_attr("lib.Base", "act", "lambda self, h: torch.tanh(h)"),
        values=((0, 0),),
    ),
    Operator(
        "mro_at_import",
        "lib.OBJ.f(h)",
        lib="class P1:\n    def f(self, h):\n        return h * {a}\nclass P2:\n    def f(self, h):\n        return h * {b}\n"  # noqa: E501
        "class Mix(*((P2, P1) if B else (P1, P2))):\n    pass\nOBJ = Mix()",
    ),
    Operator(
        "property_at_import",
        "h * lib.CFG.k",
        lib="class Cfg:\n    if B:\n        @property\n        def k(self):\n            return {b}\n    else:\n"
        "        @property\n        def k(self):\n            return {a}\nCFG = Cfg()",
    ),
    Operator(
        "call_override_at_import",
        "ACT(h)",
        lib="class Act(torch.nn.Module):\n    if B:\n        def __call__(self, h):\n            return torch.tanh(h)\n"
        "    def forward(self, h):\n        return torch.relu(h)",
        defs="ACT = lib.Act()",
        values=((0, 0),),
    ),
    Operator(
        "instance_forward",
        "ACT(h)",
        defs="ACT = torch.nn.ReLU()",
        setup="if not B:\n    return None\nACT.forward = lambda t: torch.tanh(t)\nreturn lambda: ACT.__dict__.pop('forward')",  # noqa: E501
        values=((0, 0),),
    ),
    Operator(
        "operator_overload_at_import",
        "h * lib.K",
        lib="class Scale:\n    if B:\n        def __rmul__(self, h):\n            return h * {b}\n    else:\n"
        "        def __rmul__(self, h):\n            return h * {a}\nK = Scale()",
    ),
    Operator(
        "autograd_function_at_import",
        "lib.Fn.apply(h)",
        lib="K = {b} if B else {a}\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, h):\n"
        "        return h * K\n    @staticmethod\n    def backward(ctx, g):\n        return g * K",
    ),
    # 3. global module hooks
    Operator(
        "global_forward_hook",
        "ACT(h)",
        defs="ACT = torch.nn.ReLU()",
        setup=_hook("register_module_forward_hook", "lambda m, i, o: o * 2.0 if isinstance(o, torch.Tensor) else o"),
        values=((0, 0),),
    ),
    Operator(
        "global_forward_pre_hook",
        "ACT(h)",
        defs="ACT = torch.nn.ReLU()",
        setup=_hook(
            "register_module_forward_pre_hook",
            "lambda m, i: tuple(t - 0.5 if isinstance(t, torch.Tensor) else t for t in i)",
        ),
        values=((0, 0),),
        zoo=False,  # shifts a real model's token ids too: the reference raises
    ),
    Operator(
        "global_backward_hook",
        "ACT(h)",
        defs="ACT = torch.nn.Tanh()",
        setup=_hook(
            "register_module_full_backward_hook", "lambda m, gi, go: tuple(g * 3.0 if g is not None else g for g in gi)"
        ),
        values=((0, 0),),
        bases=("train",),
    ),
    # 5. the environment read inside compiled code
    Operator("environ_get", "h * float(os.environ.get('AOTC_PAIR_K', '1.0'))", setup=_set_env("AOTC_PAIR_K")),
    Operator("getenv", "h * float(os.getenv('AOTC_PAIR_K', '1.0'))", setup=_set_env("AOTC_PAIR_K")),
    Operator("environ_item", "h * float(os.environ['AOTC_PAIR_K'])", setup=_set_env("AOTC_PAIR_K")),
    Operator(
        "environ_in_lib",
        "lib.act(h)",
        lib="def act(h):\n    if os.environ.get('AOTC_PAIR_K') == '{b}':\n        return torch.tanh(h)\n    return torch.relu(h)",  # noqa: E501
        setup=_set_env("AOTC_PAIR_K"),
    ),
    # 6. assume_constant_result
    Operator(
        "assume_constant_result",
        "h * lib.k()",
        lib="@torch._dynamo.assume_constant_result\ndef k():\n    return float(os.environ.get('AOTC_PAIR_K', '1.0'))",
        setup=_set_env("AOTC_PAIR_K"),
    ),
    # process-wide state beyond the examples
    Operator(
        "default_dtype",
        "(h + torch.full((h.shape[-1],), 0.1)).float()",
        setup="old = torch.get_default_dtype()\nif B:\n    torch.set_default_dtype(torch.float64)\n"
        "return lambda: torch.set_default_dtype(old)",
        values=((0, 0),),
        zoo=False,  # a real model built under float64 meets float32 inputs: the reference raises
    ),
    Operator(
        "dynamo_config",
        "h * 2 + 1",
        setup="import torch._dynamo.config as c\nold = c.assume_static_by_default\nif B:\n"
        "    c.assume_static_by_default = False\nreturn lambda: setattr(c, 'assume_static_by_default', old)",
        values=((0, 0),),
        observable=False,
    ),
]


def _process_group(world: str, rank: str = "0") -> str:
    """setup(): a process group of `world` ranks (this process is `rank`) on torch's fake backend, one process; the
    world and rank are the variant's ({a} in A, {b} in B); undone by destroying it."""
    return (
        "import torch.distributed as dist\n"
        "from torch.testing._internal.distributed.fake_pg import FakeStore\n"
        f"dist.init_process_group('fake', store=FakeStore(), rank={rank}, world_size={world})\n"
        "return dist.destroy_process_group"
    )


# Process-wide state Dynamo folds to a constant while tracing, without a guard (issue 41): one process differs from the
# other in the answer of a query (torch._dynamo.variables.torch.constant_fold_functions; frames/process_state.py).
PROCESS_STATE_OPERATORS: list[Operator] = [
    Operator(
        "dist_initialized",
        "h * ({b} if torch.distributed.is_initialized() else {a})",
        setup="if not B:\n    return None\n" + _process_group("1"),
        zoo=False,
    ),
    Operator(
        "dist_world_size",
        "h * torch.distributed.get_world_size()",
        setup=_process_group("{b} if B else {a}"),
        values=((2, 4), (1, 3)),
        zoo=False,
    ),
    Operator(
        "dist_rank",
        "h + torch.distributed.get_rank()",
        setup=_process_group("4", "{b} if B else {a}"),
        values=((0, 1), (2, 3)),
        zoo=False,
    ),
    Operator(
        "autocast_dtype_read",
        "h * ({b} if torch.get_autocast_dtype('cpu') == torch.float16 else {a})",
        setup="old = torch.get_autocast_dtype('cpu')\n"
        "torch.set_autocast_dtype('cpu', torch.float16 if B else torch.bfloat16)\n"
        "return lambda: torch.set_autocast_dtype('cpu', old)",
    ),
    Operator(
        "autocast_enabled_read",
        "h * ({b} if torch.is_autocast_enabled('cpu') else {a})",
        setup="if not B:\n    return None\nctx = torch.autocast('cpu', dtype=torch.bfloat16)\nctx.__enter__()\n"
        "return lambda: ctx.__exit__(None, None, None)",
        values=((2.0, 3.0),),
        zoo=False,  # a real model under autocast differs from the reference in bf16 rounding only: not the point
    ),
    Operator(
        "autocast_cache_read",
        "h * ({b} if torch.is_autocast_cache_enabled() else {a})",
        setup="old = torch.is_autocast_cache_enabled()\ntorch.set_autocast_cache_enabled(not B)\n"
        "return lambda: torch.set_autocast_cache_enabled(old)",
    ),
    Operator(
        "cublas_tf32_read",
        "h * ({b} if torch._C._get_cublas_allow_tf32() else {a})",
        setup="old = torch.backends.cuda.matmul.allow_tf32\ntorch.backends.cuda.matmul.allow_tf32 = B\n"
        "return lambda: setattr(torch.backends.cuda.matmul, 'allow_tf32', old)",
    ),
    Operator(
        "sdpa_backend_switch",
        "F.scaled_dot_product_attention(h.view(1, 2, -1, 4), h.view(1, 2, -1, 4) * 0.5, h.view(1, 2, -1, 4)).view_as(h)",  # noqa: E501
        setup="from torch.nn.attention import SDPBackend, sdpa_kernel\n"
        "ctx = sdpa_kernel([SDPBackend.MATH] if B else [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])\n"
        "ctx.__enter__()\nreturn lambda: ctx.__exit__(None, None, None)",
        values=((0, 0),),
        zoo=False,
    ),
    Operator(
        "inductor_decomposition",
        "F.gelu(h)",
        # Registered as a library does at import, before the compile: Inductor copies its table at the first
        # compile of the process (fast_random_decomps), so a batch's process starts the copy again.
        setup="from torch._inductor import decomposition as _decomp\n"
        "gelu = torch.ops.aten.gelu.default\nold = _decomp.decompositions[gelu]\n"
        "if B:\n    _decomp.decompositions[gelu] = lambda x, approximate='none': x * torch.sigmoid(1.702 * x)\n"
        "_decomp.fast_random_decomps.cache_clear()\n"
        "def undo():\n    _decomp.decompositions[gelu] = old\n    _decomp.fast_random_decomps.cache_clear()\n"
        "return undo",
        values=((0, 0),),
        zoo=False,
    ),
    Operator(
        "nan_sign",
        "h * math.copysign({a}, lib.K)",
        lib="K = -math.nan if B else math.nan",
        values=((2.0, 2.0), (0.5, 0.5)),
    ),
    Operator(
        "negative_zero",
        "h * math.copysign({a}, lib.K)",
        lib="K = -0.0 if B else 0.0",
        values=((2.0, 2.0),),
    ),
    Operator(
        "set_iteration_order",
        "lib.apply(h)",
        lib="ORDER = {{16, 8}} if B else {{8, 16}}  # equal sets, another iteration order (8 and 16 collide)\n"
        "def apply(h):\n    for k in ORDER:\n        h = h * k + 1\n    return h",
        values=((0, 0),),
    ),
    Operator(
        "hook_prepend",
        "ACT(h)",
        defs="ACT = torch.nn.Identity()",
        setup="first = ACT.register_forward_pre_hook(lambda m, i: (i[0] * {a},))\n"
        "second = ACT.register_forward_pre_hook(lambda m, i: (i[0] + 1,), prepend=B)\n"
        "return lambda: (first.remove(), second.remove())",
        values=((2.0, 2.0), (3.0, 3.0)),
    ),
    Operator(
        "enum_member",
        "h * lib.act(lib.CHOICE)",
        lib="import enum\nclass Kind(enum.Enum):\n    SMALL = 1\n    LARGE = 2\n"
        "CHOICE = Kind.LARGE if B else Kind.SMALL\n"
        "def act(kind):\n    return {b} if kind is Kind.LARGE else {a}",
    ),
]
OPERATORS += PROCESS_STATE_OPERATORS
BY_OPERATOR = {op.name: op for op in OPERATORS}


@dataclasses.dataclass(frozen=True)
class Base:
    """A program around one use (`USE`, an expression of h). `text` is the main module's body after the defs."""

    name: str
    text: str
    zoo: bool = False  # a real model (Hugging Face): slower, drawn at a fixed rate by generated_pairs


BASES: list[Base] = [
    Base(
        "fn",
        """
def body(x):
    h = x * 1.5 - 0.25
    h = USE
    return h + 1

def run(backend):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return {"y": torch.compile(body, backend=backend)(x)}
""",
    ),
    Base(
        "module",
        """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        h = USE
        return h.sum(-1)

def run(backend):
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 8)
    with torch.no_grad():
        return {"y": torch.compile(model, backend=backend)(x)}
""",
    ),
    Base(
        "inner",
        """
class Inner(torch.nn.Module):
    def forward(self, h):
        return USE

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.inner = Inner()

    def forward(self, x):
        return self.inner(self.lin(x)) * 2

def run(backend):
    torch.manual_seed(1)
    model = Net()
    x = torch.randn(3, 8)
    with torch.no_grad():
        return {"y": torch.compile(model, backend=backend)(x)}
""",
    ),
    Base(
        "break",
        """
def body(x):
    h = torch.sin(x) + 0.5
    torch._dynamo.graph_break()
    h = USE
    return h * 3

def run(backend):
    torch.manual_seed(2)
    x = torch.randn(5, 8)
    return {"y": torch.compile(body, backend=backend)(x)}
""",
    ),
    Base(
        "train",
        """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        h = USE
        return h.square().mean()

def run(backend):
    torch.manual_seed(3)
    model = Net()
    x = torch.randn(4, 8)
    loss = torch.compile(model, backend=backend)(x)
    loss.backward()
    return {"loss": loss.detach(), "grad.w": model.lin.weight.grad, "grad.b": model.lin.bias.grad}
""",
    ),
    Base(
        "dynamic",
        """
def body(x):
    h = x - 0.5
    h = USE
    return h.sum(0)

def run(backend):
    torch.manual_seed(4)
    f = torch.compile(body, backend=backend, dynamic=True)
    return {"y4": f(torch.randn(4, 8)), "y6": f(torch.randn(6, 8))}
""",
    ),
    Base(
        "twice",
        """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        return USE

def run(backend):
    torch.manual_seed(5)
    model = Net()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        return {"y1": compiled(torch.randn(2, 8)), "y2": compiled(torch.randn(2, 8))}
""",
    ),
    # Zoo models: the use sits inside a Hugging Face model's own code path, in a subclass of one of its modules
    # swapped in by __class__ (weights kept), as kernel libraries and fine-tuning tools swap them. Small configs of the
    # zoo's architectures (tests/python/support/zoo_models.py), random weights; the zoo's workloads (train, generate,
    # infer).
    Base(
        "hf_gpt2_train",
        """
from transformers.models.gpt2 import modeling_gpt2

class MLP(modeling_gpt2.GPT2MLP):
    def forward(self, hidden_states):
        h = super().forward(hidden_states)
        return USE

def run(backend):
    import transformers
    torch.manual_seed(6)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    for block in model.transformer.h:
        block.mlp.__class__ = MLP
    ids = torch.randint(0, 64, (2, 8))
    loss = torch.compile(model, backend=backend)(input_ids=ids, labels=ids).loss
    loss.backward()
    return {"loss": loss.detach(), "grad.wte": model.transformer.wte.weight.grad,
            "grad.fc": model.transformer.h[1].mlp.c_fc.weight.grad}
""",
        zoo=True,
    ),
    Base(
        "hf_llama_generate",
        """
from transformers.models.llama import modeling_llama

class MLP(modeling_llama.LlamaMLP):
    def forward(self, x):
        h = super().forward(x)
        return USE

def run(backend):
    import transformers
    torch.manual_seed(7)
    cfg = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=32,
                                   intermediate_size=64, vocab_size=64, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).eval()
    for layer in model.model.layers:
        layer.mlp.__class__ = MLP
    model.forward = torch.compile(model.forward, backend=backend)
    ids = torch.randint(3, 64, (1, 6))
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    return {"sequences": out.sequences, "scores": torch.stack(out.scores)}
""",
        zoo=True,
    ),
    Base(
        "hf_bert_infer",
        """
from transformers.models.bert import modeling_bert

class Intermediate(modeling_bert.BertIntermediate):
    def forward(self, hidden_states):
        h = super().forward(hidden_states)
        return USE

def run(backend):
    import transformers
    torch.manual_seed(8)
    cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                  vocab_size=64, max_position_embeddings=32)
    model = transformers.BertModel(cfg).eval()
    for layer in model.encoder.layer:
        layer.intermediate.__class__ = Intermediate
    ids = torch.randint(3, 64, (2, 8))
    with torch.no_grad():
        return {"hidden": torch.compile(model, backend=backend)(input_ids=ids).last_hidden_state}
""",
        zoo=True,
    ),
]
BY_BASE = {b.name: b for b in BASES}


@dataclasses.dataclass(frozen=True)
class Pair:
    name: str
    files: dict  # module name -> text
    module: str  # the module the worker imports
    operator: str
    base: str
    note: str = ""
    observable: bool = True  # A's and B's results must differ (the pair tests something)


def _fill(text: str, values: tuple) -> str:
    a, b = values
    if isinstance(a, str):
        return text.format(fa=a, fb=b, a=repr(a), b=repr(b))
    return text.format(a=a, b=b, fa=a, fb=b)


def make_pair(op: Operator, base: Base, values: tuple, index: int | str) -> Pair:
    module = f"fp_{index}_{op.name}_{base.name}"
    lib = f"{module}_lib"
    use = _fill(op.use, values)
    body = base.text.replace("USE", use)
    main = PRELUDE
    if op.lib:
        main += f"import {lib} as lib\n"
    main += "\n" + _fill(op.defs, values) + "\n" if op.defs else ""
    main += body
    setup = _fill(op.setup, values) if op.setup else "return None"
    main += "\ndef setup():\n" + textwrap.indent(setup, "    ") + "\n"
    files = {module: main}
    if op.lib:
        files[lib] = PRELUDE + "\n" + _fill(op.lib, values) + "\n"
    return Pair(f"{op.name}.{base.name}.{index}", files, module, op.name, base.name, op.note, op.observable)


# The base each operator is shown in by the fixed table: module (inlined from nn.Module's forward) unless it needs
# another.
def attack_pairs() -> list[Pair]:
    pairs = []
    for i, op in enumerate(OPERATORS):
        base = (op.bases or ("module",))[0]
        pairs.append(make_pair(op, BY_BASE[base], op.values[i % len(op.values)], f"a{i}"))
    pairs += special_pairs()
    return pairs


ZOO_EVERY = 10  # one generated pair in ZOO_EVERY is drawn in a zoo base (each costs ~20 s a pass: a real model)


def generated_pairs(seed: int, n: int) -> list[Pair]:
    """`n` pairs drawn with `seed`, operator by operator in rounds (every operator once per round, in a shuffled
    order), each with a base and values drawn without repetition until that operator's combinations are used up.
    Every ZOO_EVERY-th pair is drawn in a zoo base (Hugging Face models, in turn), the others in the small programs."""
    rng = random.Random(seed)
    choices, zoo_choices = {}, {}
    for op in OPERATORS:
        applies = [base for base in BASES if (op.bases is None or base.name in op.bases) and (op.zoo or not base.zoo)]
        combos = [(base, values) for base in applies if not base.zoo for values in op.values]
        rng.shuffle(combos)
        choices[op.name] = combos
        zoo_choices[op.name] = [base for base in applies if base.zoo]
    zoo = [b for b in BASES if b.zoo]
    out: list[Pair] = []
    round_ = 0
    while len(out) < n:
        order = list(OPERATORS)
        rng.shuffle(order)
        for op in order:
            if len(out) == n:
                break
            base, values = choices[op.name][round_ % len(choices[op.name])]
            if len(out) % ZOO_EVERY == ZOO_EVERY - 1 and zoo_choices[op.name]:
                wanted = zoo[(len(out) // ZOO_EVERY) % len(zoo)]
                base = wanted if wanted in zoo_choices[op.name] else zoo_choices[op.name][0]
                values = op.values[rng.randrange(len(op.values))]
            out.append(make_pair(op, base, values, f"g{seed}_{len(out)}"))
        round_ += 1
    return out


def pairs_in_bases(names: list[str]) -> list[Pair]:
    """Every operator that applies in each named base, once, with its first values (a base's full sweep)."""
    out = []
    for name in names:
        base = BY_BASE[name]
        for op in OPERATORS:
            if (op.bases is None or name in op.bases) and (op.zoo or not base.zoo):
                out.append(make_pair(op, base, op.values[0], "s"))
    return out


# ---- hand-written pairs on real code ----------------------------------------------------------------------------
_HF_GPT2 = (
    PRELUDE
    + """
import transformers
from transformers.models.gpt2 import modeling_gpt2

def patched_mlp_forward(self, hidden_states):
    return self.dropout(self.c_proj(torch.tanh(self.c_fc(hidden_states))))

def setup():
    old = modeling_gpt2.GPT2MLP.forward
    if B:
        modeling_gpt2.GPT2MLP.forward = patched_mlp_forward
    return lambda: setattr(modeling_gpt2.GPT2MLP, "forward", old)

def run(backend):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        return {"logits": torch.compile(model, backend=backend)(ids).logits}
"""
)

_TRAIN_EVAL = (
    PRELUDE
    + """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(torch.relu(self.lin(x))).sum()

def setup():
    return None

def run(backend):
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(4, 8)
    model.eval()
    with torch.no_grad():
        ev = compiled(x)
    model.train()
    loss = compiled(x) * (3.0 if B else 1.0)
    loss.backward()
    return {"eval": ev, "loss": loss.detach(), "grad": model.lin.weight.grad}
"""
)


# A kernel library's patch of a Hugging Face layer (as Liger-style libraries patch RMSNorm), and an attention function
# registered under the name the model uses (AttentionInterface.register, as kernel libraries do).
_HF_LLAMA = (
    PRELUDE
    + """
import transformers
from transformers.models.llama import modeling_llama

def patched_rms_forward(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * hidden_states * torch.rsqrt(variance + 1e-2)

def my_sdpa(module, query, key, value, attention_mask, **kwargs):
    out, weights = transformers.integrations.sdpa_attention.sdpa_attention_forward(
        module, query, key, value, attention_mask, **kwargs
    )
    return out * 0.5, weights

def setup():
    old_rms = modeling_llama.LlamaRMSNorm.forward
    interface = transformers.modeling_utils.AttentionInterface
    old_sdpa = interface._global_mapping["sdpa"]
    if B and os.environ.get("AOTC_PAIR_HF_PATCH") != "attention":
        modeling_llama.LlamaRMSNorm.forward = patched_rms_forward
    if B and os.environ.get("AOTC_PAIR_HF_PATCH") == "attention":
        interface.register("sdpa", my_sdpa)

    def undo():
        modeling_llama.LlamaRMSNorm.forward = old_rms
        interface._global_mapping["sdpa"] = old_sdpa

    return undo

def run(backend):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=64, max_position_embeddings=32, attn_implementation="sdpa",
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        return {"logits": torch.compile(model, backend=backend)(ids).logits}
"""
)


def _hf_llama_pair(name: str, patch: str) -> Pair:
    # one file per pair, the patch chosen by the file's own name (both pairs run in one process)
    text = _HF_LLAMA.replace('os.environ.get("AOTC_PAIR_HF_PATCH")', repr(patch))
    return Pair(name, {f"fp_{name}": text}, f"fp_{name}", "class_method_patched", "hf_llama")


# A warm process that calls eval before the training step, on a cache whose process recorded the training step first:
# the training candidate is tried (and fails) at the eval call, then must be served at the training call.
_EVAL_BEFORE_TRAIN = (
    PRELUDE
    + """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        if isinstance(x, torch.Tensor) and len(x.shape) == 2:
            x = x * 1.0
        return self.drop(torch.relu(self.lin(x))).sum()

def setup():
    return None

def _train(compiled, model, x):
    loss = compiled(x)
    loss.backward()
    return loss.detach()

def _eval(compiled, model, x):
    # Inference without model.eval(): only the grad mode (a per-call guard, not in the read set) differs, so the
    # training candidate gets as far as its guards, which fail.
    with torch.no_grad():
        return compiled(x)

def run(backend):
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(4, 8)
    if B:
        ev, loss = _eval(compiled, model, x), _train(compiled, model, x)
    else:
        loss, ev = _train(compiled, model, x), _eval(compiled, model, x)
    return {"eval": ev, "loss": loss, "grad": model.lin.weight.grad}
"""
)

# A frame whose guarded input is a non-leaf tensor: Dynamo's guard pickler reads its .grad, which warns.
_NONLEAF_INPUT = (
    PRELUDE
    + """
def body(y):
    return torch.sin(y) * 2

def setup():
    return None

def run(backend):
    torch.manual_seed(0)
    x = torch.randn(4, 8, requires_grad=True)
    y = x * (2.0 if B else 3.0)
    out = torch.compile(body, backend=backend)(y)
    out.sum().backward()
    return {"out": out.detach(), "grad": x.grad}
"""
)


# A graph break deep in an inlined call, in A only: Dynamo rolls the inlining attempt back and breaks at the
# outermost call, in the wrapper's frame (as Hugging Face's `can_return_tuple` wraps every model's forward). B, whose
# inner code does not break, inlines it all into the wrapper's frame: A's wrapper frame, whose final trace read only
# the wrapper, must not be served to B (what decided the break was read by the attempt Dynamo rolled back).
_BREAK_IN_INLINED_LIB = (
    PRELUDE
    + """
BREAK = not B

def inner(x):
    h = torch.sin(x)
    if BREAK:
        torch._dynamo.graph_break()
    return torch.cos(h) * 2
"""
)
_BREAK_IN_INLINED = (
    PRELUDE
    + """
import fp_break_inlined_lib as lib

def returns_tuple(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out
    return wrapped

@returns_tuple
def outer(x):
    return lib.inner(x + 1) - 1

def setup():
    return None

def run(backend):
    torch.manual_seed(0)
    return {"out": torch.compile(outer, backend=backend)(torch.randn(4, 4))}
"""
)


def special_pairs() -> list[Pair]:
    return [
        Pair("hf_gpt2_mlp_patched", {"fp_hf_gpt2": _HF_GPT2}, "fp_hf_gpt2", "class_method_patched", "hf_gpt2"),
        _hf_llama_pair("hf_llama_rmsnorm_patched", "rmsnorm"),
        _hf_llama_pair("hf_llama_attention_registered", "attention"),
        Pair(
            "eval_then_train",
            {"fp_eval_train": _TRAIN_EVAL},
            "fp_eval_train",
            "none",
            "eval_then_train",
            "an eval call before the training step: the warm process must compile nothing",
        ),
        Pair(
            "eval_before_train",
            {"fp_eval_before_train": _EVAL_BEFORE_TRAIN},
            "fp_eval_before_train",
            "none",
            "eval_before_train",
            "A recorded the training step first; B calls eval first, then trains: both frames served",
        ),
        Pair("nonleaf_input", {"fp_nonleaf_input": _NONLEAF_INPUT}, "fp_nonleaf_input", "none", "nonleaf_input"),
        Pair(
            "break_in_inlined_call",
            {"fp_break_inlined": _BREAK_IN_INLINED, "fp_break_inlined_lib": _BREAK_IN_INLINED_LIB},
            "fp_break_inlined",
            "graph_break_decided_inside",
            "break_in_inlined_call",
            "A breaks the graph deep in an inlined call, B does not: A's wrapper frame must not be served to B",
            observable=False,
        ),
    ]
