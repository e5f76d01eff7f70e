"""What a frame entry pins by content instead of by identity: code objects, the source files of inlined code, and
the objects Dynamo guards by `id()` (modules, functions, classes), so that a later process checks them by value.

Everything here is deterministic across processes and checkouts: no `id()`, no file paths, no line-independent
reprs of objects with addresses. Anything that cannot be pinned raises `Unportable` (the frame is then traced as
usual and the reason counted).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import marshal
import sys
import types
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


def source_of(code: types.CodeType) -> tuple[str, str]:
    """(module name, digest of its source file) of a code object Dynamo inlined. The code must be the module's
    as the file now reads: a code object built from other text (exec, a file edited after import) is refused."""
    module = inspect.getmodule(code)
    if module is None:
        raise Unportable(f"inlined code {code.co_qualname} belongs to no module")
    name = module.__name__
    digest = module_digest(name)
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError) as e:
        raise Unportable(f"inlined code {code.co_qualname} has no source: {e}") from None
    if first != code.co_firstlineno and not (first == 0 and code.co_firstlineno == 1):
        raise Unportable(f"inlined code {code.co_qualname} does not match its file")
    return name, digest


def sources_unchanged(sources: list[list[str]]) -> bool:
    """True when every (module, digest) recorded still holds in this process (the module is imported first, as the
    frame's own code would import it)."""
    for name, digest in sources:
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


# ---- objects Dynamo guards by identity --------------------------------------------------------------------------------
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
    if isinstance(value, types.FunctionType):
        return ("function", value.__module__ or "", value.__qualname__, code_digest(value.__code__))
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ("torch", type(value).__name__, str(value))
    if value is None or isinstance(value, (bool, type(Ellipsis), type(NotImplemented))):
        return ("constant", repr(value))
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        try:
            resolved = _resolve(module, qualname)
        except Unportable:
            raise
        except Exception:
            resolved = None
        if resolved is value:
            return ("named", module, qualname)
    raise Unportable(f"a {type(value).__qualname__} guarded by identity")


_CONSTANTS = {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis, "NotImplemented": NotImplemented}


@functools.lru_cache(maxsize=None)
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
    if kind == "torch":
        return type(value).__name__ == description[1] and str(value) == description[2]
    if kind == "constant":
        return value is _CONSTANTS[description[1]]
    if kind == "named":
        try:
            return _named(description[1], description[2]) is value
        except Exception:
            return False
    return False
