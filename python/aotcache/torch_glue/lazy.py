"""The names a torch_glue module lends the rest of aotcache, imported from torch on first use.

A table maps each name to where it lives in torch ("torch._x.y" for a module, "torch._x.y:attr" for an attribute of
one). The name is looked up the first time it is read (`from aotcache.torch_glue.dynamo import pgo` inside a
function imports `torch._dynamo.pgo` then, as the function's own import did), then kept in the module's globals:
the import cost stays where each caller had it, and every private name aotcache uses is listed in one table per
torch subsystem.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lender(namespace: dict[str, Any], table: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` (PEP 562) of the module whose globals are `namespace`, lending `table`'s names."""

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        module_name, _, attr = where.partition(":")
        value: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else ():
            value = getattr(value, part)
        namespace[name] = value
        return value

    return __getattr__
