"""The names a torch_glue module lends the rest of aotcache, imported from torch on first use.

A table maps each name to where it lives in torch ("torch._x.y" for a module, "torch._x.y:attr" for an attribute of
one). A module is imported the first time it is read (`from aotcache.torch_glue.dynamo import pgo` inside a function
imports `torch._dynamo.pgo` then, as the function's own import did) and kept; an attribute of a module is read from
the module at every use, as `from module import attr` would read it (a rebound torch function is seen). The import
cost stays where each caller had it, and every private name aotcache uses is listed in one table per torch
subsystem.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lender(namespace: dict[str, Any], table: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` (PEP 562) of the module whose globals are `namespace`, lending `table`'s names."""
    modules: dict[str, Any] = {}

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        module_name, _, attr = where.partition(":")
        module = modules.get(module_name)
        if module is None:
            module = modules[module_name] = importlib.import_module(module_name)
        if not attr:
            namespace[name] = module  # a module is the same object for the process: kept
            return module
        value: Any = module
        for part in attr.split("."):
            value = getattr(value, part)
        return value  # read again at each use, as `from module import attr` would: torch (or a test) may rebind it

    return __getattr__
