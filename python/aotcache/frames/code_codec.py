"""Code objects in frame entries: marshal (the Python version is in the frame key), with the constants marshal
cannot write (Dynamo's transformed bytecode loads torch.device, torch.dtype and other objects as constants)
replaced by markers and described by content (content.describe), rebuilt by the same description on load."""

from __future__ import annotations

import marshal
import types
from typing import Any

import torch

from aotcache.frames import content

_MARKER = "__aotcache_constant__"


def dump(code: types.CodeType) -> tuple[bytes, list[list[Any]]]:
    """(marshalled code, descriptions of the constants replaced by markers). Raises content.Unportable."""
    described: list[list[Any]] = []
    return marshal.dumps(_replace(code, described)), described


def load(data: bytes, described: list[list[Any]]) -> types.CodeType:
    values = [_rebuild(d) for d in described]
    return _restore(marshal.loads(data), values)


def _replace(code: types.CodeType, described: list[list[Any]]) -> types.CodeType:
    consts = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            consts.append(_replace(c, described))
            continue
        if isinstance(c, tuple) and len(c) == 2 and c[0] == _MARKER:
            raise content.Unportable("the code holds a constant that looks like a marker")
        try:
            marshal.dumps(c)
            consts.append(c)
        except ValueError:
            described.append(list(content.describe(c)))
            consts.append((_MARKER, len(described) - 1))
    return code.replace(co_consts=tuple(consts))


def _restore(code: types.CodeType, values: list[Any]) -> types.CodeType:
    consts = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            consts.append(_restore(c, values))
        elif isinstance(c, tuple) and len(c) == 2 and c[0] == _MARKER:
            consts.append(values[c[1]])
        else:
            consts.append(c)
    return code.replace(co_consts=tuple(consts))


def _rebuild(description: list[Any]) -> Any:
    kind = description[0]
    if kind == "torch":
        type_name, text = description[1], description[2]
        if type_name == "device":
            return torch.device(text)
        value = getattr(torch, text.rsplit(".", 1)[-1], None)
        if type(value).__name__ == type_name and str(value) == text:
            return value
    elif kind == "constant":
        return {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis}[description[1]]
    elif kind in ("named", "module", "function"):
        value = content.resolve_description(tuple(description))
        if content.matches(tuple(description), value):
            return value
    raise ValueError(f"constant {description!r} cannot be rebuilt in this process")
