"""Cases of the frame cache's cross-process test (test_frames.py), run by frames_worker.py.

Each case is a function `case(variant: bool) -> dict[str, tensor]`: it builds its inputs from fixed seeds, compiles
with the backend named by CASE_BACKEND, runs, and returns what to compare. With `variant=True` the case changes
what a stale frame entry would get wrong (a global, a closure value, a monkeypatched function, a Dynamo config);
test_frames.py additionally rewrites the source of frame_helpers.py between the processes of the variant pass.

EXPECT says what the warm process must see: "hit" (every frame of the case served from the frame cache, no Dynamo
tracing); with the variant, every case must still give exactly backend="inductor"'s results, and the cases listed
in MUST_RETRACE must trace at least one frame again (a frame hit there would be a stale result).
"""

from __future__ import annotations

import collections
import os

import frame_helpers
import frame_registry
import peft_like_enum
import torch

CASE_BACKEND = os.environ.get("FRAME_CASES_BACKEND", "aotcache")


def _compile(fn, **kw):
    return torch.compile(fn, backend=CASE_BACKEND, **kw)


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def mlp_train(variant: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = Mlp()
    out = _compile(model)(torch.randn(8, 16))
    out.sum().backward()
    return {"out": out.detach(), "grad": model.fc1.weight.grad}


def _with_break(x):
    y = torch.sin(x) * 2
    torch._dynamo.graph_break()
    return torch.cos(y) + 1


def graph_break(variant: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {"out": _compile(_with_break)(torch.randn(5, 7))}


SCALE = 3.0


def _scaled(x):
    return x * SCALE + 1


def global_constant(variant: bool) -> dict[str, torch.Tensor]:
    global SCALE
    SCALE = 5.0 if variant else 3.0
    torch.manual_seed(2)
    return {"out": _compile(_scaled)(torch.randn(4, 4))}


def _make_closure(k: float):
    def inner(x):
        return x * k - 2

    return inner


def closure_value(variant: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(3)
    return {"out": _compile(_make_closure(7.0 if variant else 4.0))(torch.randn(6))}


def _uses_helper(x):
    return frame_helpers.helper(x) + x.sum()


def inlined_source_changed(variant: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(4)
    return {"out": _compile(_uses_helper)(torch.randn(3, 5))}


def _activation(x):
    return torch.nn.functional.silu(x) * 2


def monkeypatched_function(variant: bool) -> dict[str, torch.Tensor]:
    original = torch.nn.functional.silu
    if variant:
        torch.nn.functional.silu = lambda t, inplace=False: torch.tanh(t)  # a user's patch, made before compiling
    try:
        torch.manual_seed(5)
        return {"out": _compile(_activation)(torch.randn(4, 6))}
    finally:
        torch.nn.functional.silu = original


def _reduce(x):
    return (x.relu() * 3).sum(0)


def automatic_dynamic(variant: bool) -> dict[str, torch.Tensor]:
    fn = _compile(_reduce)
    torch.manual_seed(6)
    a, b, c = (fn(torch.randn(n, 8)) for n in (4, 6, 9))
    return {"a": a, "b": b, "c": c}


def _dtype_branch(x):
    if x.dtype == torch.float64:
        return x * 2
    return x - 1


def dtype_recompile(variant: bool) -> dict[str, torch.Tensor]:
    """Three candidates of one frame: the warm process checks the first two again at the third call."""
    fn = _compile(_dtype_branch)
    torch.manual_seed(7)
    x = torch.randn(5)
    return {"f32": fn(x), "f64": fn(x.double()), "i64": fn((x * 10).long())}


def _sized(x):
    return x.view(-1)[: x.shape[0]] * 2


def dynamic_true(variant: bool) -> dict[str, torch.Tensor]:
    fn = _compile(_sized, dynamic=True)
    torch.manual_seed(8)
    return {"a": fn(torch.randn(3, 4)), "b": fn(torch.randn(5, 4))}


def _float_arg(x, c: float):
    return x * c


def config_changed(variant: bool) -> dict[str, torch.Tensor]:
    # A Dynamo config that changes what tracing produces: Python floats become symbolic inputs instead of constants.
    torch.manual_seed(9)
    with torch._dynamo.config.patch(specialize_float=not variant):
        fn = _compile(_float_arg)
        return {"out": fn(torch.randn(4), 2.5)}


def _update_and_add(a, b):
    a.add_(1)
    return a + b


def storage_sharing(variant: bool) -> dict[str, torch.Tensor]:
    # Two views of one tensor or two tensors with the same sizes, strides and offsets: Dynamo's guards do not tell
    # them apart; the graph key does, and so must the frame entry (its storage-partition guard).
    if variant:
        base = torch.arange(10.0)
        a, b = base[0:6], base[3:9]
        out = _compile(_update_and_add)(a, b)
        return {"out": out, "base": base}
    base1, base2 = torch.arange(10.0), torch.arange(10.0)
    out = _compile(_update_and_add)(base1[0:6], base2[3:9])
    return {"out": out, "base": base1 + base2}


def module_hook_added(variant: bool) -> dict[str, torch.Tensor]:
    # A forward hook on a submodule: Dynamo does not guard hooks by default (skip_nnmodule_hook_guards), and every
    # module's forward is traced through the same code; a frame recorded without the hook must not serve it.
    torch.manual_seed(10)
    model = Mlp()
    if variant:
        model.fc1.register_forward_hook(lambda mod, args, output: output * 0.5)
    return {"out": _compile(model)(torch.randn(3, 16))}


def _rowsum(x):
    return x.cos().sum(1)


def mark_dynamic_input(variant: bool) -> dict[str, torch.Tensor]:
    # torch._dynamo.mark_dynamic: Dynamo guards the markings from the tensor it serialized, which lost them; the
    # entry carries them (without, a marked tensor never hit its frame).
    fn = _compile(_rowsum)
    torch.manual_seed(12)
    out = {}
    for n in (8, 12):
        x = torch.randn(n, 5)
        torch._dynamo.mark_dynamic(x, 0)
        out[f"n{n}"] = fn(x)
    return out


def _scale_in_place(x):
    x.mul_(2).add_(1)
    return x.sum()


def view_offsets(variant: bool) -> dict[str, torch.Tensor]:
    # One graph input, a view mutated in place, at two offsets of its base: Dynamo serves both calls with one graph.
    # The base is not a graph input; guarding its storage sharing with the view (offsets included) made the second
    # call trace again and compile.
    fn = _compile(_scale_in_place)
    torch.manual_seed(13)
    base = torch.randn(6, 4)
    return {"s0": fn(base[::2]), "s1": fn(base[1::2]), "base": base}


def _int_arg(x, n: int):
    return x * n + n


def automatic_dynamic_after_hit(variant: bool) -> dict[str, torch.Tensor]:
    # The variant calls with ints the recording process never saw: after the frame hit for n=2, Dynamo must know n
    # was 2 (the entry carries its automatic-dynamic state) and trace n=3 symbolic at once, which then serves n=5,
    # as in a fresh process (2 graphs); without the state it traced a static graph for 3 and a symbolic one for 5.
    fn = _compile(_int_arg)
    torch.manual_seed(14)
    x = torch.randn(4)
    return {f"n{n}": fn(x, n) for n in ((2, 3, 5) if variant else (2,))}


def train_then_eval(variant: bool) -> dict[str, torch.Tensor]:
    # The eval frame is compiled after a backward: the parameters Dynamo guards carry .grad, which its guard pickler
    # writes as a placeholder (no guard reads it), and the rebuilt guards failed to assign it: never recorded.
    torch.manual_seed(15)
    model = Mlp()
    compiled = _compile(model)
    x = torch.randn(8, 16)
    compiled(x).sum().backward()
    model.eval()
    with torch.no_grad():
        out = compiled(x)
    return {"out": out, "grad": model.fc1.weight.grad}


class Output(collections.OrderedDict):
    """A dict subclass with its own __getitem__, like Hugging Face's ModelOutput (T5's encoder_outputs)."""

    def __getitem__(self, k):
        return dict.__getitem__(self, k) if isinstance(k, str) else list(self.values())[k]


def _first_of(x, **kwargs):
    return x + kwargs["enc"][0] * 2


def dict_subclass_input(variant: bool) -> dict[str, torch.Tensor]:
    # Dynamo names an item of such a dict `dict.__getitem__(d, list(dict.keys(d))[0])`: the storage-partition guard
    # evaluated the names of the graph inputs without builtins, so it rejected the call it was traced for and the
    # frame was never recorded (T5's and Whisper's generate). The variant puts another tensor first.
    torch.manual_seed(16)
    x, h, a = torch.randn(3), torch.randn(3), torch.randn(3)
    enc = Output(a=a, h=h) if variant else Output(h=h)
    return {"out": _compile(_first_of)(x, enc=enc)}


def _registered(x):
    return frame_registry.product(x, "mine")


def registry_order(variant: bool) -> dict[str, torch.Tensor]:
    # Dynamo builds a guard manager by reading, in the live registry, the entry whose key order it guards, by its
    # position: with fewer entries (a process that registered fewer models) building the recorded guards raised
    # IndexError, an internal error of the frame cache, and no later candidate was tried. It must be a guard failure.
    frame_registry.REGISTRY.clear()
    if not variant:
        frame_registry.REGISTRY["other"] = {"scale": 5.0}
    frame_registry.REGISTRY["mine"] = {"scale": 4.0 if variant else 2.0, "shift": 3.0}
    torch.manual_seed(17)
    return {"out": _compile(_registered)(torch.randn(4))}


BREAK_INSIDE = True


def _inner_breaks(x):
    h = torch.sin(x) * len(x.shape)  # a builtin read in the attempt Dynamo rolls back
    if BREAK_INSIDE:
        torch._dynamo.graph_break()
        return torch.cos(h) + 1
    return torch.cos(h) + 2


def _wrapping(fn):
    def wrapped(x):
        return fn(x) * 2

    return wrapped


def break_in_inlined_call(variant: bool) -> dict[str, torch.Tensor]:
    """A graph break inside an inlined call: the wrapper's frame is traced after a rolled-back attempt, and what that
    attempt read (the helper, the flag, `len` through Dynamo's builtins dict) must hold again in a fresh process.
    The variant's helper does not break: the wrapper's frame then inlines it (traced again)."""
    global BREAK_INSIDE
    BREAK_INSIDE = not variant
    torch.manual_seed(18)
    return {"out": _compile(_wrapping(_inner_breaks))(torch.randn(3, 5))}


class DtypeMixinModule(Mlp):
    """As every LightningModule (its _DeviceDtypeModuleMixin): the module holds its dtype and device, unread."""

    def __init__(self) -> None:
        super().__init__()
        self._dtype = torch.float32
        self._device = torch.device("cpu")


def dtype_attribute(variant: bool) -> dict[str, torch.Tensor]:
    # Dynamo's guard pickler wrote the unread `_dtype` as a placeholder, marked by id: torch.float32 is one object
    # per process, so every guarded tensor's dtype became the placeholder and no guard rebuilt (every Lightning frame
    # bypassed guards_unloadable). The variant is the module in float64.
    torch.manual_seed(19)
    model, x = DtypeMixinModule(), torch.randn(8, 16)
    if variant:
        model, x = model.double(), x.double()
        model._dtype = torch.float64
    return {"out": _compile(model)(x)}


class Adapter(torch.nn.Module):
    """As a PEFT LoRA layer: it branches on an Enum member it holds (PeftType)."""

    def __init__(self, kind: peft_like_enum.Kind) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 4)
        self.kind = kind

    def forward(self, x):
        y = self.lin(x)
        return y * 2 if self.kind is peft_like_enum.Kind.LORA else y + 1


def enum_attribute(variant: bool) -> dict[str, torch.Tensor]:
    # Dynamo guards the member by identity: it was unportable (never recorded, every PEFT frame traced). Now by its
    # class and name; the variant holds another member and must trace again.
    torch.manual_seed(20)
    kind = peft_like_enum.Kind.IA3 if variant else peft_like_enum.Kind.LORA
    return {"out": _compile(Adapter(kind))(torch.randn(8, 16))}


class HookedLaterMlp(Mlp):
    pass


def hook_after_first_call(variant: bool) -> dict[str, torch.Tensor]:
    # A hook registered after the frame's first call: a frame Dynamo traced does not see it (torch's default
    # skip_nnmodule_hook_guards), so neither does a served one, whose hook-dict checks run on its first call only
    # (format 4 checked them on every call: served and traced frames then computed different things).
    torch.manual_seed(21)
    model = HookedLaterMlp()  # a class of its own: its frame is keyed apart from the other cases' Mlp
    compiled = _compile(model)
    x = torch.randn(8, 16)
    with torch.no_grad():
        first = compiled(x)
        handle = model.fc2.register_forward_hook(lambda module, args, out: out * 2)
        second = compiled(x)
        handle.remove()
    return {"first": first, "second": second}


class HookedAfterCompileMlp(Mlp):
    pass


def hook_ids_shifted(variant: bool) -> dict[str, torch.Tensor]:
    # A hook registered after another compile: its key in the hook dict is a handle id from a process-wide counter
    # (RemovableHandle.next_id), which tracing moves (a traced compile makes handles, a served one none), so warm
    # the same hook has another key. The program sees the hooks' order, never their keys: the frame is served (the
    # hook dicts' order was read with their keys, and a DTensor job's frames under parallelize_module never hit).
    torch.manual_seed(22)
    warmup = Mlp()
    _compile(warmup)(torch.randn(2, 16)).sum().backward()
    model = HookedAfterCompileMlp()
    model.fc1.register_forward_hook(lambda module, args, out: out * 0.5)
    model.fc2.register_forward_pre_hook(lambda module, args: (args[0] + 1,))
    return {"out": _compile(model)(torch.randn(4, 16))}


CASES = {
    f.__name__: f
    for f in (
        mlp_train,
        graph_break,
        global_constant,
        closure_value,
        inlined_source_changed,
        monkeypatched_function,
        automatic_dynamic,
        dtype_recompile,
        dynamic_true,
        config_changed,
        storage_sharing,
        module_hook_added,
        mark_dynamic_input,
        view_offsets,
        automatic_dynamic_after_hit,
        train_then_eval,
        dict_subclass_input,
        registry_order,
        break_in_inlined_call,
        dtype_attribute,
        enum_attribute,
        hook_after_first_call,
        hook_ids_shifted,
    )
}
MUST_RETRACE = {
    "global_constant",
    "closure_value",
    "inlined_source_changed",
    "monkeypatched_function",
    "config_changed",
    "registry_order",
    "break_in_inlined_call",
    "dtype_attribute",
    "enum_attribute",
}
