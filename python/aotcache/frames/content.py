"""What a frame entry pins by content instead of by identity: code objects, the source files of inlined code, and
the objects Dynamo guards by `id()` (modules, functions, classes), so that a later process checks them by value.

Everything here is deterministic across processes and checkouts: no `id()`, no file paths, no line-independent
reprs of objects with addresses. Anything that cannot be pinned raises `Unportable` (the frame is then traced as
usual and the reason counted).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib
import inspect
import itertools
import marshal
import os
import pickle
import struct
import sys
import types
import weakref
from typing import Any

import torch


class Unportable(Exception):
    """A value, guard or code object a frame entry cannot pin by content; the message says which."""


# ---- code objects ---------------------------------------------------------------------------------------------------
_code_digests: dict[int, tuple[types.CodeType, str]] = {}


def normalized(code: types.CodeType) -> types.CodeType:
    """`code` with its file name cleared, recursively through nested code constants: what it does, not where its
    file lies (a moved checkout keeps its digests)."""
    consts = tuple(normalized(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="", co_consts=consts)


def code_digest(code: types.CodeType) -> str:
    """SHA-256 of the marshalled, normalized code object (bytecode, constants, names, nested code, line table),
    memoized per code object (code objects are immutable; the memo holds them, so ids are not reused)."""
    memo = _code_digests.get(id(code))
    if memo is not None and memo[0] is code:
        return memo[1]
    digest = hashlib.sha256(marshal.dumps(normalized(code))).hexdigest()
    _code_digests[id(code)] = (code, digest)
    return digest


# ---- source files of inlined code -----------------------------------------------------------------------------------
_file_digests: dict[str, str] = {}


def _module_file(module_name: str) -> str:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        raise Unportable(f"module {module_name} has no Python source file")
    return path


def module_digest(module_name: str) -> str:
    """SHA-256 of the source file of an imported module, memoized per process."""
    path = _module_file(module_name)
    digest = _file_digests.get(path)
    if digest is None:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        _file_digests[path] = digest
    return digest


# source_of's answer for each code object, per process like the file digests it is made of: the frames of one
# model inline the same functions again and again (gpt2:generate's three frames: 836 calls, 0.54 s without it).
# By identity, not by key equality: two code objects compare equal when their bytecode, names and constants do,
# whatever file they come from (the same helper in two modules), and each must answer with its own module. A
# WeakKeyDictionary (equality) did not: a frame inlining the second got the first's module and file digest, so an
# edit of its own file went unseen (found by the zoo pairs: hf_llama_generate after hf_gpt2_train).
_sources_of: dict[int, tuple[weakref.ref, tuple[str, str] | str]] = {}


def source_of(code: types.CodeType) -> tuple[str, str]:
    """(module name, digest of its source file) of a code object Dynamo inlined. The code must be the module's
    as the file now reads: a code object built from other text (exec, a file edited after import) is refused
    (Unportable). Answered once per code object and process."""
    held = _sources_of.get(id(code))
    known = held[1] if held is not None and held[0]() is code else None
    if known is None:
        try:
            known = _source_of(code)
        except Unportable as e:
            known = str(e)
        key = id(code)
        _sources_of[key] = (weakref.ref(code, lambda _, key=key: _forget_source(key)), known)
    if isinstance(known, str):
        raise Unportable(known)
    return known


def _forget_source(key: int) -> None:
    held = _sources_of.get(key)
    if held is not None and held[0]() is None:
        del _sources_of[key]


def _source_of(code: types.CodeType) -> tuple[str, str]:
    if _is_stdlib(code.co_filename):
        return ("<stdlib>", sys.version)  # the exact Python version is in the frame key
    if not os.path.isfile(code.co_filename):  # generated code (a dataclass's __init__): pinned through its class
        return _generated_source(code)
    module = inspect.getmodule(code)
    if module is None:
        raise Unportable(f"inlined code {code.co_qualname} belongs to no module")
    name = module.__name__
    digest = module_digest(name)
    try:
        _, first = inspect.getsourcelines(code)
    except (OSError, TypeError) as e:
        raise Unportable(f"inlined code {code.co_qualname} has no source: {e}") from None
    # Comprehensions and lambdas report their enclosing lines; the file digest covers them either way.
    if (
        not code.co_name.startswith("<")
        and first != code.co_firstlineno
        and not (first == 0 and code.co_firstlineno == 1)
    ):
        raise Unportable(f"inlined code {code.co_qualname} does not match its file")
    return name, digest


def _generated_source(code: types.CodeType) -> tuple[str, str]:
    """("<attr>", JSON [module, class qualname, attribute, code digest]) for generated code that is the method of an
    importable class (dataclasses exec the __init__ of each dataclass): checked by finding it there again. Found
    through the garbage collector's referrers, on the recording path only."""
    import gc
    import json

    for fn in gc.get_referrers(code):
        if not (isinstance(fn, types.FunctionType) and fn.__code__ is code):
            continue
        # Each scan of the referrers walks every object of the process (about 40 ms in a process that built a Hugging
        # Face model): first the class that dataclasses names the function after, in the module whose globals it
        # runs in; the two further scans (function -> class namespace -> class) only when that is not it.
        named = _named_owner(fn)
        owners = [named] if named is not None else []
        if not owners:
            owners = [o for ns in gc.get_referrers(fn) if isinstance(ns, dict) for o in gc.get_referrers(ns)]
        for owner in owners:
            if not isinstance(owner, type) or owner.__dict__.get(code.co_name) is not fn:
                continue
            try:
                described = describe(owner)
            except Unportable:
                continue
            if described[0] == "named":
                return ("<attr>", json.dumps([described[1], described[2], code.co_name, code_digest(code)]))
    raise Unportable(f"inlined code {code.co_qualname} was generated and belongs to no importable class")


def _named_owner(fn: types.FunctionType) -> Any:
    """The class `fn` names as its owner (qualname "Cls.__init__", globals of Cls's module: what dataclasses sets),
    if that class holds `fn` itself; None otherwise."""
    owner_qualname, _, attribute = fn.__qualname__.rpartition(".")
    module = fn.__globals__.get("__name__")
    if not owner_qualname or "<locals>" in owner_qualname or not isinstance(module, str) or module not in sys.modules:
        return None
    owner: Any = sys.modules[module]
    for part in owner_qualname.split("."):
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) and owner.__dict__.get(attribute) is fn else None


def _generated_unchanged(spec: str) -> bool:
    import json

    module, qualname, attribute, digest = json.loads(spec)
    try:
        fn = vars(_resolve(module, qualname)).get(attribute)
    except Exception:
        return False
    return isinstance(fn, types.FunctionType) and code_digest(fn.__code__) == digest


@functools.lru_cache(maxsize=4096)
def _is_stdlib(filename: str) -> bool:
    """Code of Python's own library (frozen modules included): pinned by the exact Python version."""
    if filename.startswith("<frozen "):
        return True
    import sysconfig

    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
    real = os.path.realpath(filename)
    return real.startswith(stdlib) and "site-packages" not in real[len(stdlib) :]


def sources_unchanged(sources: list[list[str]]) -> bool:
    """True when every (module, digest) recorded still holds in this process (the module is imported first, as the
    frame's own code would import it)."""
    for name, digest in sources:
        if name == "<stdlib>":
            if digest != sys.version:
                return False
            continue
        if name == "<attr>":
            if not _generated_unchanged(digest):
                return False
            continue
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:
                return False
        try:
            if module_digest(name) != digest:
                return False
        except (Unportable, OSError):
            return False
    return True


# ---- objects Dynamo guards by identity ------------------------------------------------------------------------------
def _resolve(module: str, qualname: str) -> Any:
    if "<locals>" in qualname:
        raise Unportable(f"{module}.{qualname} is local to a function")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def describe(value: Any) -> tuple:
    """A portable description of an object guarded by identity, checked by `matches` in another process."""
    if isinstance(value, types.ModuleType):
        if sys.modules.get(value.__name__) is not value:
            raise Unportable(f"module {value.__name__} is not the one of sys.modules")
        return ("module", value.__name__)
    if isinstance(value, types.CodeType):
        return ("code", code_digest(value))
    if isinstance(value, types.FunctionType):
        return ("function", value.__module__ or "", value.__qualname__, code_digest(value.__code__))
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ("torch", type(value).__name__, str(value))
    if value is None or isinstance(value, (bool, type(Ellipsis), type(NotImplemented))):
        return ("constant", repr(value))
    if type(value) in _IMMUTABLE_SCALARS:  # identity of an immutable value: its value (small ints are interned)
        return ("scalar", type(value).__name__, _scalar_repr(value))
    if isinstance(value, enum.Enum):
        # A member of an importable Enum (PEFT's PeftType.LORA): its class by name and its name; the class's content
        # (its members' values, its methods) is the read set's (read_set.Fingerprints of the guarded value).
        cls = type(value)
        try:
            if _resolve(cls.__module__, cls.__qualname__) is cls and cls[value.name] is value:
                return ("enum", cls.__module__, cls.__qualname__, value.name)
        except Exception:
            pass
        raise Unportable(f"{cls.__qualname__}.{value.name} is a member of an Enum that cannot be imported by name")
    for module, qualname in _importable_names(value):
        try:
            if _resolve(module, qualname) is value:
                return ("named", module, qualname)
        except Exception:
            continue
    state = _state_digest(value)
    if state is not None:
        return ("state", type(value).__module__, type(value).__qualname__, state)
    raise Unportable(f"a {type(value).__qualname__} guarded by identity ({value!r:.80})")


_IMMUTABLE_SCALARS = (int, float, complex, str, bytes)


def _scalar_repr(value: Any) -> str:
    """repr, with a float's (or complex part's) bits where repr loses them: NaN's sign and payload."""
    if type(value) is float:
        return f"{value!r}:{struct.pack('<d', value).hex()}"
    if type(value) is complex:
        return f"{value!r}:{struct.pack('<dd', value.real, value.imag).hex()}"
    return repr(value)


_DEFAULT_PICKLING = ("__reduce__", "__reduce_ex__", "__getstate__")


def _state_digest(value: Any) -> str | None:
    """For a plain object (an instance of an importable class that pickles the default way: its __dict__, no slots):
    SHA-256 over the pickle of its attributes, sorted by name; for a dict, over its items, sorted by key. Dynamo
    guards some such objects by identity (a model's configuration object, its __dict__); in another process the
    same object is one of the same class with the same state. None when the object is not plain or its state does
    not pickle."""
    t = type(value)
    if t is dict:  # an object's attribute dict (its config's __dict__, say): by its items
        try:
            return hashlib.sha256(pickle.dumps(sorted(value.items()), protocol=4)).hexdigest()
        except Exception:
            return None
    if isinstance(value, type) or not hasattr(value, "__dict__") or "<locals>" in t.__qualname__:
        return None
    if any(getattr(t, name, None) is not getattr(object, name) for name in _DEFAULT_PICKLING):
        return None
    if any(getattr(k, "__slots__", None) for k in t.__mro__):
        return None
    try:
        if _resolve(t.__module__, t.__qualname__) is not t:
            return None
        return hashlib.sha256(pickle.dumps(sorted(vars(value).items()), protocol=4)).hexdigest()
    except Exception:
        return None


def _importable_names(value: Any) -> list[tuple[str, str]]:
    """Where `value` may be found by import: its own module and qualified name, and for builtins and method
    descriptors the module or class that holds them (torch.cat is torch._VariableFunctionsClass.cat by its
    qualified name, but importable as torch.cat)."""
    names = []
    module, qualname, name = (getattr(value, a, None) for a in ("__module__", "__qualname__", "__name__"))
    if isinstance(module, str):
        names += [(module, q) for q in (qualname, name) if isinstance(q, str)]
    for holder in (getattr(value, "__objclass__", None), getattr(value, "__self__", None)):
        if not isinstance(name, str):
            break
        if isinstance(holder, types.ModuleType):
            names.append((holder.__name__, name))
        elif isinstance(holder, type) and isinstance(holder.__module__, str):
            names.append((holder.__module__, f"{holder.__qualname__}.{name}"))
    return names


def resolve_description(description: tuple) -> Any:
    """The object a "module", "function" or "named" description names in this process (check it with `matches`)."""
    import sys as _sys

    if description[0] == "module":
        return _sys.modules.get(description[1]) or importlib.import_module(description[1])
    return _resolve(description[1], description[2])


_CONSTANTS = {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis, "NotImplemented": NotImplemented}


@functools.cache
def _named(module: str, qualname: str) -> Any:
    return _resolve(module, qualname)


def matches(description: tuple, value: Any) -> bool:
    """Whether `value` is, in this process, the object `description` was made from."""
    kind = description[0]
    if kind == "module":
        return isinstance(value, types.ModuleType) and sys.modules.get(description[1]) is value
    if kind == "function":
        return (
            isinstance(value, types.FunctionType)
            and (value.__module__ or "") == description[1]
            and value.__qualname__ == description[2]
            and code_digest(value.__code__) == description[3]
        )
    if kind == "code":
        return isinstance(value, types.CodeType) and code_digest(value) == description[1]
    if kind == "torch":
        return type(value).__name__ == description[1] and str(value) == description[2]
    if kind == "constant":
        return value is _CONSTANTS[description[1]]
    if kind == "named":
        try:
            return _named(description[1], description[2]) is value
        except Exception:
            return False
    if kind == "scalar":
        return (
            type(value).__name__ == description[1]
            and type(value) in _IMMUTABLE_SCALARS
            and _scalar_repr(value) == description[2]
        )
    if kind == "enum":
        t = type(value)
        try:
            return (
                isinstance(value, enum.Enum)
                and t.__module__ == description[1]
                and t.__qualname__ == description[2]
                and value.name == description[3]
                and _named(description[1], description[2]) is t
            )
        except Exception:
            return False
    if kind == "state":
        t = type(value)
        return (
            t.__module__ == description[1]
            and t.__qualname__ == description[2]
            and _state_digest(value) == description[3]
        )
    return False


# ---- what a frame's closure holds, by kind (a part of the frame key) ------------------------------------------------
def closure_kinds(closure: tuple | None) -> list[str]:
    """A stable description of the kind of each closure cell's content: a module by its class and structure
    (submodule classes, parameter and buffer shapes and dtypes), a function by its qualified name, anything else by
    its type. It splits frame entries, not trust: a frame of one code (torch's own wrapper of every compiled
    nn.Module, say) gets one entry per model instead of one entry whose candidates every model evicts. The guards
    still check every value."""
    out = []
    for cell in closure or ():
        try:
            value = cell.cell_contents
        except ValueError:
            out.append("<empty cell>")
            continue
        out.append(_kind(value))
    return out


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _kind(value: Any) -> str:
    if isinstance(value, torch.nn.Module):
        return f"module {_type_name(type(value))} {_module_structure(value)}"
    if isinstance(value, types.MethodType):
        owner = value.__self__
        what = _module_structure(owner) if isinstance(owner, torch.nn.Module) else ""
        return f"method {_type_name(type(owner))}.{value.__func__.__name__} {what}".rstrip()
    if isinstance(value, types.FunctionType):
        return f"function {value.__module__}.{value.__qualname__}"
    return f"value {_type_name(type(value))}"


def _module_structure(module: torch.nn.Module) -> str:
    """Digest of a module's submodule classes and its parameters' and buffers' names, shapes and dtypes."""
    h = hashlib.sha256()
    try:
        for name, sub in module.named_modules(remove_duplicate=False):
            h.update(f"m {name} {_type_name(type(sub))}\n".encode())
        for name, t in itertools.chain(
            module.named_parameters(remove_duplicate=False), module.named_buffers(remove_duplicate=False)
        ):
            h.update(f"t {name} {tuple(t.shape)} {t.dtype}\n".encode())
    except Exception as e:  # a module whose traversal raises: its class alone (the guards decide)
        return f"<structure unreadable: {type(e).__name__}>"
    return h.hexdigest()[:16]
