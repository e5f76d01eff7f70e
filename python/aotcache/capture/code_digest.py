"""A stable digest of user Python code: what pins a custom op's implementation or a checkpoint policy into the key.

The digest covers what decides the function's behaviour and survives a restart or a moved checkout: its source text
(dedented, so re-indenting a nested def does not matter), its default arguments, the values it closes over and the
module-level values it reads, recursively for the user functions it calls. It never uses `id()`, `repr()` of
objects with addresses, file paths or line numbers. Anything it cannot pin by value raises `Unhashable`, and the
caller bypasses the cache (fail closed).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import textwrap
import types
from typing import Any

import torch

from aotcache.torch_glue import dispatch


class Unhashable(Exception):
    """The code reads something whose value cannot be pinned; the message names it."""


_MAX_DEPTH = 8


def function_digest(fn: Any) -> str:
    """Hex SHA-256 of `fn`'s behaviour-defining parts. Raises Unhashable."""
    h = hashlib.sha256()
    _feed_callable(fn, h, depth=0, seen=set())
    return h.hexdigest()


def _feed(h: Any, tag: str, text: str) -> None:
    data = text.encode()
    h.update(f"{tag}:{len(data)}:".encode())
    h.update(data)


def _feed_callable(fn: Any, h: Any, depth: int, seen: set) -> None:
    if depth > _MAX_DEPTH:
        raise Unhashable(f"calls nested deeper than {_MAX_DEPTH} user functions")
    if isinstance(fn, functools.partial):
        _feed(h, "partial", str(len(fn.args)))
        _feed_callable(fn.func, h, depth + 1, seen)
        for a in fn.args:
            _feed_value(a, h, depth + 1, seen, "a partial's argument")
        for k in sorted(fn.keywords):
            _feed(h, "kw", k)
            _feed_value(fn.keywords[k], h, depth + 1, seen, f"a partial's argument {k}")
        return
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if isinstance(fn, types.MethodType):
        _feed_value(fn.__self__, h, depth + 1, seen, "a bound method's object")
        fn = fn.__func__
    name = _torch_name(fn)
    if name is not None:  # torch's own code is pinned by the torch version in the environment component
        _feed(h, "torch", name)
        return
    if not isinstance(fn, types.FunctionType):
        raise Unhashable(f"{_describe(fn)} is not a Python function")
    code = fn.__code__
    if code in seen:  # recursion: the function is already being fed
        _feed(h, "recursive", fn.__qualname__)
        return
    seen.add(code)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise Unhashable(f"the source of {fn.__qualname__} is unavailable ({e})") from None
    _feed(h, "source", source)
    for d in fn.__defaults__ or ():
        _feed_value(d, h, depth + 1, seen, f"a default argument of {fn.__qualname__}")
    for k in sorted(fn.__kwdefaults__ or {}):
        _feed(h, "kwdefault", k)
        _feed_value(fn.__kwdefaults__[k], h, depth + 1, seen, f"default {k} of {fn.__qualname__}")
    for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
        _feed(h, "closure", var)
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: the variable is not bound yet
            _feed(h, "empty", var)
            continue
        _feed_value(value, h, depth + 1, seen, f"{var} (closed over by {fn.__qualname__})")
    for global_name in sorted(global_names(code)):
        if global_name not in fn.__globals__:
            continue  # an attribute name or a builtin
        _feed(h, "global", global_name)
        _feed_value(fn.__globals__[global_name], h, depth + 1, seen, f"global {global_name} of {fn.__qualname__}")


def global_names(code: types.CodeType) -> set[str]:
    """Names the code (and its nested functions and comprehensions) may load as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


def _torch_name(obj: Any) -> str | None:
    """The qualified name of a torch-owned callable or class, else None."""
    if isinstance(obj, (dispatch.OpOverload, dispatch.OpOverloadPacket)):
        return str(obj)
    module = getattr(obj, "__module__", None) or ""
    if module == "torch" or module.startswith("torch."):
        qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        if qualname:
            return f"{module}.{qualname}"
    return None


def _feed_value(value: Any, h: Any, depth: int, seen: set, what: str) -> None:
    t = type(value)
    if value is None or t in (bool, int, float, str, bytes):
        _feed(h, t.__name__, repr(value))
    elif t in (list, tuple):
        _feed(h, t.__name__, str(len(value)))
        for v in value:
            _feed_value(v, h, depth, seen, what)
    elif t in (set, frozenset):
        parts = []
        for v in value:
            sub = hashlib.sha256()
            _feed_value(v, sub, depth, seen, what)
            parts.append(sub.hexdigest())
        _feed(h, "set", ",".join(sorted(parts)))
    elif t is dict:
        _feed(h, "dict", str(len(value)))
        for k, v in sorted(value.items(), key=lambda kv: repr(kv[0])):
            _feed_value(k, h, depth, seen, what)
            _feed_value(v, h, depth, seen, what)
    elif isinstance(value, enum.Enum):
        _feed(h, "enum", f"{t.__module__}.{t.__qualname__}.{value.name}")
    elif isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        _feed(h, "torch_constant", str(value))
    elif isinstance(value, types.ModuleType):
        _feed(h, "module", value.__name__)
    elif _torch_name(value) is not None:
        _feed(h, "torch", _torch_name(value))
    elif isinstance(value, (types.FunctionType, functools.partial, types.MethodType)):
        _feed_callable(value, h, depth, seen)
    elif isinstance(value, type):
        # A user class: its methods' code is not pinned (only functions are followed).
        raise Unhashable(f"{what} is the class {value.__module__}.{value.__qualname__}")
    else:
        raise Unhashable(f"{what} is a {t.__module__}.{t.__qualname__}, whose value cannot be pinned")


def _describe(obj: Any) -> str:
    t = type(obj)
    return f"{getattr(obj, '__qualname__', '?')} ({t.__module__}.{t.__qualname__})"
