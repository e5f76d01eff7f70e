"""The read set of a recorded frame: what Dynamo read while tracing, by content, checked in full when a frame loads.

Dynamo's serialized guards are rebuilt on load by evaluating each guard's source in the pickled scope of the
recording, in which a module, a class or a function's globals are the *loading* process's own objects (a module is
pickled by name). A guard on `lib.K == 2.0` is rebuilt as `lib.K == <lib.K now>`, a type guard as the class that name
has now, a builtin guard as whatever `torch.relu` is bound to now: they all hold. So the value each guard was built
on is recorded here, by content, while the frame is traced, and on load every source is evaluated in the loading
frame and its content compared before Dynamo's guards are rebuilt. Dynamo's guards then only check what must be
evaluated per call; this checks that the objects the trace depended on are the objects it saw.

Content (`fingerprint`), never identity:
- a function: its module, qualified name, code (by digest), defaults, keyword defaults, closure cell contents and
  the functions, classes, modules and builtins its code's global names hold (shallow; its data globals are read
  through guarded sources when Dynamo inlines it);
- a class: its MRO by name and, for each class in it that Python code can change (heap types), every attribute of
  its namespace by content (methods by code, defaults and closure; properties, static and class methods by their
  functions; scalars by value); a static (C) type by name;
- a builtin: the C function's own module and qualified name and what it is bound to (`torch.relu` rebound to
  `torch.sigmoid` names sigmoid), checked on the value the name gives now;
- a module: its name and that it is sys.modules' own;
- scalars by type and repr, small containers element-wise, tensors by metadata (not values: they are graph inputs
  or guarded by Dynamo per call), other objects by their class.

Beyond Dynamo's guards, `facts` are process-wide states a trace depends on that Dynamo does not guard in a way a
frame entry carries: the global nn.Module hooks (registered after a frame was recorded, a fresh trace would inline
them) and torch.Tensor's methods (called by name).
"""

from __future__ import annotations

import collections
import enum
import functools
import hashlib
import re
import struct
import sys
import types
from typing import Any

import torch

from aotcache.capture import code_digest
from aotcache.frames import content

# Guard kinds whose check compares the value at the source with the value it had when the guard was built.
VALUE_KINDS = frozenset(
    {
        "EQUALS_MATCH",
        "CONSTANT_MATCH",
        "ID_MATCH",
        "FUNCTION_MATCH",
        "CLOSURE_MATCH",
        "BUILTIN_MATCH",
        "MODULE_MATCH",
        "CLASS_MATCH",
        "BOOL_MATCH",
        "NONE_MATCH",
        "NOT_NONE_MATCH",
        "CONSTANT_SUBCLASS_MATCH",
    }
)
TYPE_KINDS = frozenset({"TYPE_MATCH"})
LENGTH_KINDS = frozenset({"SEQUENCE_LENGTH", "TUPLE_ITERATOR_LEN", "LENGTH_CHECK", "LIST_LENGTH", "DICT_LENGTH"})
KEYS_KINDS = frozenset({"DICT_KEYS_MATCH", "MAPPING_KEYS_CHECK", "DICT_KEYS"})
# Not a Dynamo guard kind: the order a container is iterated in, where the program saw it and Dynamo's guard does not
# check it: a set or dict the trace iterated (Dynamo notes them in output_graph.guard_on_key_order; it compares sets
# by equality: {8, 16} == {16, 8}, iterated 8, 16 or 16, 8),
ORDER_KIND = "ITERATION_ORDER"
# Not a Dynamo guard kind either: the order of the values of an OrderedDict whose items Dynamo reads by position (a
# module's hook dicts: a hook registered with prepend=True runs first while Dynamo's guard, reading the underlying
# dict, still finds the recorded order). Values only: a hook dict's keys are handle ids from a process-wide counter
# (RemovableHandle.next_id), which every compile and every hook registered before moves, and the program never sees.
POSITION_KIND = "POSITION_ORDER"

_MAX_DEPTH = 4
_CODE_GLOBALS = (types.FunctionType, type, types.ModuleType, types.BuiltinFunctionType)
_DESCRIPTORS = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.ClassMethodDescriptorType,
)
_MAX_ITEMS = 64
_HEAPTYPE = 1 << 9


_SCALAR_BASES = (bool, int, float, complex, str, bytes)


def _SCALAR_BASE_OF(value: Any) -> type:
    return next(base for base in _SCALAR_BASES if isinstance(value, base))


def scalar_text(value: Any) -> str:
    """A scalar as exactly as a program can observe it: floats (and complex parts) by their bits, so NaN's sign
    and payload and -0.0 count (repr gives "nan" for both signs, and NaN is unequal to itself)."""
    t = type(value)
    if t is float:
        return f"float:{struct.pack('<d', value).hex()}:{value!r}"
    if t is complex:
        return f"complex:{struct.pack('<dd', value.real, value.imag).hex()}:{value!r}"
    return f"{t.__name__}:{value!r}"


class Fingerprints:
    """One pass of fingerprinting (a recording or a load): classes and functions memoized for its duration only, so
    a change between two loads is always seen."""

    def __init__(self, traced: frozenset[str] | None = None) -> None:
        self._memo: dict[tuple[int, int], tuple[Any, str]] = {}
        # Qualified names of the code the trace ran (None: every method counts): a class's methods by content only
        # where the trace could have run them (and the protocol methods Dynamo resolves by identity), by name
        # otherwise, so an edited __init__ or an unused helper does not keep a frame from being served.
        self.traced = traced

    def of(self, value: Any, depth: int = 0) -> str:
        key = (id(value), depth)  # the text depends on the depth it is cut at
        hit = self._memo.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        try:
            text = self._text(value, depth)
        except Exception as e:  # an object that cannot be read: by its type, with the failure
            text = f"unreadable:{_type_name(type(value))}:{type(e).__name__}"
        if isinstance(value, (type, types.FunctionType)):
            self._memo[key] = (value, text)
        return text

    def digest(self, value: Any) -> str:
        return hashlib.sha256(self.of(value).encode()).hexdigest()[:32]

    # ---- canonical text of a value ----------------------------------------------------------------------------
    def _text(self, value: Any, depth: int) -> str:
        t = type(value)
        if value is None or t in (bool, int, float, complex, str, bytes):
            return scalar_text(value)
        if isinstance(value, _SCALAR_BASES) and not isinstance(value, enum.Enum):
            # a subclass of int, float, str...: its class by content and the value it holds
            return f"subclass:{self.of(t, depth + 1)}:{scalar_text(_SCALAR_BASE_OF(value)(value))}"
        if t in (torch.dtype, torch.device, torch.layout, torch.memory_format):
            return f"torch:{t.__name__}:{value}"
        if isinstance(value, types.ModuleType):
            own = sys.modules.get(value.__name__) is value
            return f"module:{value.__name__}{'' if own else ':not-sys.modules'}"
        if isinstance(value, type):
            return self._class(value, depth)
        if isinstance(value, types.FunctionType):
            return self._function(value, depth)
        if isinstance(value, types.MethodType):
            return f"method:{self.of(value.__func__, depth + 1)}:self={self._shallow(value.__self__)}"
        if isinstance(value, types.BuiltinFunctionType):
            owner = value.__self__
            bound = owner.__name__ if isinstance(owner, types.ModuleType) else self._shallow(owner)
            return f"builtin:{getattr(value, '__module__', None)}:{value.__qualname__}:{bound}"
        if isinstance(value, _DESCRIPTORS):
            return f"descriptor:{t.__name__}:{_type_name(value.__objclass__)}.{value.__name__}"
        if isinstance(value, (staticmethod, classmethod)):
            return f"{t.__name__}:{self.of(value.__func__, depth + 1)}"
        if isinstance(value, property):
            parts = (self.of(f, depth + 1) for f in (value.fget, value.fset, value.fdel))
            return "property:" + ":".join(parts)
        if isinstance(value, functools.partial):
            args = ",".join(self.of(a, depth + 1) for a in value.args)
            kw = ",".join(f"{k}={self.of(v, depth + 1)}" for k, v in sorted(value.keywords.items()))
            return f"partial:{self.of(value.func, depth + 1)}:({args}):{{{kw}}}"
        if isinstance(value, torch.Tensor):
            return (
                f"tensor:{_type_name(t)}:{value.dtype}:{value.device}:{tuple(value.shape)}:"
                f"{tuple(value.stride()) if value.layout == torch.strided else value.layout}:{value.requires_grad}"
            )
        if isinstance(value, torch.nn.Module):
            return f"nn.Module:{self.of(t, depth + 1)}"
        if isinstance(value, (tuple, list, set, frozenset, dict)) and t in (tuple, list, set, frozenset, dict):
            return self._container(value, depth)
        if isinstance(value, enum.Enum):
            return f"enum:{self.of(t, depth + 1)}:{value.name}:{self.of(value.value, depth + 1)}"
        if t.__module__ == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
            # a numpy array or scalar: dtype, shape and every byte (NaN's sign too), as the program reads it
            data = value.tobytes() if getattr(value, "nbytes", 0) <= 1 << 20 else b"<large>"
            digest = hashlib.sha256(data).hexdigest()[:32]
            return f"numpy:{t.__name__}:{value.dtype}:{getattr(value, 'shape', ())}:{digest}"
        # Any other object: by its class (its attributes Dynamo read are guarded, and fingerprinted, by source).
        return f"object:{self.of(t, depth + 1)}"

    def _shallow(self, value: Any) -> str:
        t = type(value)
        if value is None or t in (bool, int, float, complex, str, bytes):
            return scalar_text(value)
        if isinstance(value, types.ModuleType):
            return f"module:{value.__name__}"
        if isinstance(value, type):
            return f"type:{_type_name(value)}"
        if isinstance(value, types.FunctionType):
            return f"fn:{value.__module__}.{value.__qualname__}:{content.code_digest(value.__code__)[:16]}"
        if t in (tuple, list, frozenset, set) and len(value) <= _MAX_ITEMS:
            parts = [self._shallow(v) for v in value]
            if t in (frozenset, set):  # iteration order follows the process's string hashes
                parts.sort()
            return f"{t.__name__}[" + ",".join(parts) + "]"
        if isinstance(value, types.BuiltinFunctionType):
            return f"builtin:{getattr(value, '__module__', None)}:{value.__qualname__}"
        if isinstance(
            value, _DESCRIPTORS
        ):  # a C method in a class namespace: which one (torch.Tensor.tanh = ...sigmoid)
            return f"descriptor:{t.__name__}:{_type_name(value.__objclass__)}.{value.__name__}"
        return f"a {_type_name(t)}"

    def _container(self, value: Any, depth: int) -> str:
        name = type(value).__name__
        if depth >= _MAX_DEPTH or len(value) > _MAX_ITEMS:
            return f"{name}:len={len(value)}"
        if isinstance(value, dict):
            items = [f"{self.of(k, depth + 1)}={self.of(v, depth + 1)}" for k, v in value.items()]
            return f"dict{{{','.join(items)}}}"
        parts = [self.of(v, depth + 1) for v in value]
        if isinstance(value, (set, frozenset)):
            parts.sort()
        return f"{name}[{','.join(parts)}]"

    def _function(self, fn: types.FunctionType, depth: int) -> str:
        parts = [f"fn:{fn.__module__}.{fn.__qualname__}:{content.code_digest(fn.__code__)}"]
        if depth >= _MAX_DEPTH:
            return parts[0] + ":deep"
        if fn.__defaults__:
            parts.append("defaults=" + ",".join(self.of(d, depth + 1) for d in fn.__defaults__))
        if fn.__kwdefaults__:
            kw = (f"{k}={self.of(v, depth + 1)}" for k, v in sorted(fn.__kwdefaults__.items()))
            parts.append("kwdefaults=" + ",".join(kw))
        for cell in fn.__closure__ or ():
            try:
                parts.append("cell=" + self.of(cell.cell_contents, depth + 1))
            except ValueError:
                parts.append("cell=<empty>")
        # The code the function's globals name (functions, classes, modules, builtins), shallow; not its data
        # globals: a trace that inlines the function reads those through guarded sources (in the read set), and
        # state flags change under the trace itself (torch.compiler.is_compiling's).
        g = fn.__globals__
        for name in _global_names(fn.__code__):
            value = g.get(name)
            if isinstance(value, _CODE_GLOBALS):
                parts.append(f"global {name}={self._shallow(value)}")
        return ":".join(parts)

    def _class(self, cls: type, depth: int) -> str:
        if not cls.__flags__ & _HEAPTYPE:
            return f"type:{_type_name(cls)}"
        if depth >= _MAX_DEPTH:
            return f"class:{_type_name(cls)}:deep"
        # The class's own namespace, then each base's text (memoized: nn.Module's namespace is read once per pass,
        # not once per subclass); the bases' texts cover the whole MRO.
        parts = [f"class:{_type_name(cls)}:mro=" + ",".join(_type_name(k) for k in cls.__mro__)]
        for name, attr in list(vars(cls).items()):
            if name not in _SKIPPED_CLASS_ATTRIBUTES:
                parts.append(f"{name}={self._attribute(attr, depth)}")
        for base in cls.__bases__:
            parts.append("base " + hashlib.sha256(self.of(base, depth).encode()).hexdigest())
        return "\n".join(parts)

    def _attribute(self, attr: Any, depth: int) -> str:
        """A class attribute: functions and descriptors by content (not their globals: code Dynamo inlines reads
        its globals through guarded sources), other values shallow."""
        if isinstance(attr, types.FunctionType):
            return self._method(attr, depth)
        if isinstance(attr, (staticmethod, classmethod)):
            inner = attr.__func__
            what = self._method(inner, depth) if isinstance(inner, types.FunctionType) else self._shallow(inner)
            return f"{type(attr).__name__}:{what}"
        if isinstance(attr, property):
            return "property:" + ":".join(
                self._method(f, depth) if isinstance(f, types.FunctionType) else self._shallow(f)
                for f in (attr.fget, attr.fset, attr.fdel)
            )
        if isinstance(attr, type):
            return f"type:{_type_name(attr)}"
        if isinstance(attr, (types.BuiltinFunctionType, functools.partial)) or type(attr) in (
            bool,
            int,
            float,
            complex,
            str,
            bytes,
        ):
            return self.of(attr, depth + 1)
        return self._shallow(attr)

    def _method(self, fn: types.FunctionType, depth: int) -> str:
        if self.traced is not None and fn.__qualname__ not in self.traced and fn.__name__ not in _PROTOCOL:
            return f"{fn.__qualname__}:not traced"
        parts = [f"{fn.__qualname__}:{content.code_digest(fn.__code__)}"]
        if fn.__defaults__:
            parts.append("defaults=" + ",".join(self._shallow(d) for d in fn.__defaults__))
        if fn.__kwdefaults__:
            parts.append(
                "kwdefaults=" + ",".join(f"{k}={self._shallow(v)}" for k, v in sorted(fn.__kwdefaults__.items()))
            )
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:
                parts.append("cell=<empty>")
                continue
            # __class__ (the cell super() reads) is the class itself: by name, not again by content
            parts.append("cell=" + (f"type:{_type_name(value)}" if isinstance(value, type) else self._shallow(value)))
        return ":".join(parts)


# Methods Dynamo resolves on a class and compares or calls without always inlining them: by content even when the
# trace did not run them.
_PROTOCOL = frozenset(
    {
        "forward",
        "__call__",
        "__getattr__",
        "__getattribute__",
        "__setattr__",
        "__torch_function__",
        "__torch_dispatch__",
    }
)

# Namespace entries that describe a class rather than decide what its code does.
_SKIPPED_CLASS_ATTRIBUTES = frozenset(
    {"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__slotnames__"}  # slotnames: pickle's cache
)


def _type_name(t: type) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', '?')}"


@functools.lru_cache(maxsize=8192)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    return tuple(sorted(code_digest.global_names(code)))


# ---- process-wide facts --------------------------------------------------------------------------------------
_GLOBAL_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
)


def global_module_hooks() -> int:
    """How many global nn.Module hooks are registered (torch.nn.modules.module's registries). Dynamo inlines them
    into every module call it traces, and guards their emptiness only by type."""
    import torch.nn.modules.module as m

    return sum(len(getattr(m, name, ())) for name in _GLOBAL_HOOK_DICTS)


def facts() -> dict[str, Any]:
    """Process-wide state a trace depends on without a guard on it: the global module hooks, and torch.Tensor's
    namespace (Dynamo calls a tensor method by name, as a call_method node, without guarding what the name holds:
    `torch.Tensor.relu = torch.Tensor.sigmoid` changes what every trace of `h.relu()` computes)."""
    return {"global_module_hooks": global_module_hooks(), "torch.Tensor": Fingerprints().digest(torch.Tensor)}


# ---- record and check -----------------------------------------------------------------------------------------
def _reading(kind: str, value: Any, fp: Fingerprints, hooks: list | None = None) -> str | None:
    """What a guard of `kind` read from `value`, as a digest; None for kinds it does not concern. `hooks`: the value's
    entries when it is a module's hook dict (`_hook_entries`), whose keys are read by what they mean, not by value."""
    if kind in VALUE_KINDS:
        return fp.digest(value)
    if kind in TYPE_KINDS:
        return fp.digest(type(value))
    if kind in LENGTH_KINDS:
        return f"len:{len(value)}"
    if kind in KEYS_KINDS:
        return fp.digest(["hook ids", [m for _, m in hooks]] if hooks is not None else list(value.keys()))
    if kind == ORDER_KIND:
        if hooks is not None:
            return fp.digest(["hooks", hooks])
        return fp.digest(list(value.items()) if isinstance(value, dict) else list(value))
    if kind == POSITION_KIND:
        return fp.digest(list(value.values()))
    return None


# A module's hook dicts map handle ids to hooks. The ids come from a process-wide counter (RemovableHandle.next_id)
# that every hook registered before, and every compile Dynamo traces, moves: a served frame's process has other ids
# for the same hooks. What the program sees of an id is whether the hook's companion dicts hold it (nn.Module's
# _call_impl: `hook_id in self._forward_hooks_with_kwargs`); so a hook dict is read as its hooks in order, each with
# the companions that hold its id (a DTensor job's frames under parallelize_module were never served).
_HOOK_COMPANIONS = {
    "_forward_hooks": ("_forward_hooks_with_kwargs", "_forward_hooks_always_called"),
    "_forward_pre_hooks": ("_forward_pre_hooks_with_kwargs",),
    "_backward_hooks": (),
    "_backward_pre_hooks": (),
    "_global_forward_hooks": ("_global_forward_hooks_with_kwargs", "_global_forward_hooks_always_called"),
    "_global_forward_pre_hooks": (),
    "_global_backward_hooks": (),
    "_global_backward_pre_hooks": (),
}
_HOOK_DICT = re.compile(r"^(.+)\.(" + "|".join(_HOOK_COMPANIONS) + r")$")


def _hook_entries(name: str, value: Any, f_locals: Any, f_globals: dict[str, Any]) -> list | None:
    """[(hook, [id in each companion dict]), ...] in order when `name` reads a hook dict of an nn.Module (or one of
    torch.nn.modules.module's global ones); None for any other source."""
    match = _HOOK_DICT.match(name)
    if match is None or not isinstance(value, dict):
        return None
    from aotcache.frames import guards

    try:
        owner = guards.eval_sources(_compiled(match.group(1)), f_locals, f_globals)[0]
    except Exception:
        return None
    import torch.nn.modules.module as module_module

    if not (isinstance(owner, torch.nn.Module) or owner is module_module):
        return None
    companions = [getattr(owner, attr, {}) for attr in _HOOK_COMPANIONS[match.group(2)]]
    return [(hook, [key in companion for companion in companions]) for key, hook in value.items()]


def _is_global_tensor_guard(kind: str, name: str) -> bool:
    # A tensor reached from the frame's globals is read live on load (a module global's tensor, say); one reached
    # from the locals is pickled with the guards and Dynamo's TENSOR_MATCH checks it per call.
    return kind == "TENSOR_MATCH" and name.startswith("G[")


def traced_names(traced_code: Any) -> list[str]:
    """The qualified names of the code a trace ran (Dynamo's tracing_context.traced_code), sorted."""
    return sorted({code.co_qualname for code in traced_code})


# Dynamo's builtins dict is installed in the module's globals under a per-trace name (`__builtins_dict___3`); a
# rolled-back attempt's may not be the final trace's, nor exist in a loading process. Its reads name this instead,
# which `view` binds to the frame's builtins dict for the check.
BUILTINS_VIEW = "__aotcache_builtins__"
_BUILTINS_DICT = re.compile(r"G\['__builtins_dict___\d+'\]")


def view(f_globals: dict[str, Any]) -> dict[str, Any]:
    """The frame's globals with BUILTINS_VIEW bound, to check rolled-back reads on (a copy: nothing is installed)."""
    from aotcache.torch_glue.dynamo import get_builtins_dict

    return {**f_globals, BUILTINS_VIEW: get_builtins_dict(f_globals)}


def _ordered_containers(builder: Any, guard: Any) -> list[Any]:
    """The sources of OrderedDicts that `guard`'s source reads an item of (Dynamo reads them by position)."""
    out = []
    source = getattr(guard, "originating_source", None)
    while source is not None:
        base = getattr(source, "base", None)
        if base is not None and "GetItem" in type(source).__name__:
            try:
                if isinstance(builder.get(base), collections.OrderedDict):
                    out.append(base)
            except Exception:
                pass
        source = base
    return out


def record(
    builder: Any,
    sorted_guards: Any,
    traced: list[str] | None = None,
    rolled_back: bool = False,
    iterated: Any = (),
) -> list[list[str]]:
    """[[source name, guard kind, digest], ...] for every guard Dynamo built on a value it read through a source,
    sorted; values evaluated by Dynamo's own builder in the recording process. `traced`: traced_names of the trace.
    `rolled_back`: the guards of a tracing attempt Dynamo abandoned; a source that names a global only that attempt
    installed (and removed) cannot be read again, here or on load: left out."""
    fp = Fingerprints(frozenset(traced) if traced is not None else None)
    scope = getattr(builder, "scope", {})
    f_locals, f_globals = scope.get("L", {}), scope.get("G", {})
    out = set()
    for guard in sorted_guards:
        kind = guard.create_fn_name()
        name = guard.name
        if not name or not (name.startswith("L[") or name.startswith("G[") or "L[" in name or "G[" in name):
            continue
        if kind not in VALUE_KINDS | TYPE_KINDS | LENGTH_KINDS | KEYS_KINDS and not _is_global_tensor_guard(kind, name):
            continue
        try:
            value = builder.get(guard)
        except Exception:
            if not rolled_back:
                raise
            continue
        hooks = _hook_entries(name, value, f_locals, f_globals) if kind in KEYS_KINDS else None
        reading = fp.digest(value) if kind == "TENSOR_MATCH" else _reading(kind, value, fp, hooks)
        if reading is not None:
            out.add((_BUILTINS_DICT.sub(f"G[{BUILTINS_VIEW!r}]", name) if rolled_back else name, kind, reading))
        for source in _ordered_containers(builder, guard):
            source_name = source.name
            if rolled_back:
                source_name = _BUILTINS_DICT.sub(f"G[{BUILTINS_VIEW!r}]", source_name)
            out.add((source_name, POSITION_KIND, _reading(POSITION_KIND, builder.get(source), fp)))
    for source in iterated:
        name = source.name
        if rolled_back or not ("L[" in name or "G[" in name):
            continue
        try:
            value = builder.get(source)
        except Exception:
            continue
        if isinstance(value, (set, frozenset, dict)):
            hooks = _hook_entries(name, value, f_locals, f_globals)
            out.add((name, ORDER_KIND, _reading(ORDER_KIND, value, fp, hooks)))
    return [list(row) for row in sorted(out)]


def changed(
    reads: list[list[str]], f_locals: Any, f_globals: dict[str, Any], traced: list[str] | None = None
) -> str | None:
    """None when every recorded source reads the same content in this frame; else what differs (for the log).
    `traced`: the names the read set was recorded with."""
    from aotcache.frames import guards

    fp = Fingerprints(frozenset(traced) if traced is not None else None)
    for name, kind, reading in reads:
        try:
            value = guards.eval_sources(_compiled(name), f_locals, f_globals)[0]
        except Exception as e:
            return f"{name} ({kind}) no longer evaluates: {type(e).__name__}"
        hooks = _hook_entries(name, value, f_locals, f_globals) if kind in KEYS_KINDS or kind == ORDER_KIND else None
        now = fp.digest(value) if kind == "TENSOR_MATCH" else _reading(kind, value, fp, hooks)
        if now != reading:
            return f"{name} ({kind}) reads other content"
    return None


def rolled_back_changed(reads: list[list[str]], f_locals: Any, f_globals: dict[str, Any]) -> str | None:
    """changed() for a candidate's rolled_back_reads: classes in full, the builtins dict through BUILTINS_VIEW."""
    return changed(reads, f_locals, view(f_globals), None) if reads else None


def facts_changed(recorded: dict[str, Any]) -> str | None:
    """What differs in this process from the facts `facts()` recorded (the others are process_state's)."""
    now = facts()
    for name, value in now.items():
        if recorded.get(name) != value:
            return f"{name}: {recorded.get(name)} when recorded, {value} now"
    return None


@functools.lru_cache(maxsize=16384)
def _compiled(name: str) -> Any:
    return compile(f"({name},)", "<aotcache read set>", "eval")
