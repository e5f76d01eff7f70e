"""Dynamo guards a frame entry can carry. Dynamo refuses to serialize guards on object identity (ID_MATCH,
FUNCTION_MATCH, CLASS_MATCH, MODULE_MATCH, CLOSURE_MATCH): an id means nothing in another process. Before Dynamo
serializes a frame's guards, each of those becomes a content guard: the same check by what the object is (a module
by its name in sys.modules, a function by its module, qualified name and code digest, a class or builtin by its
importable name; content.describe). Any other guard Dynamo cannot serialize (NN_MODULE, DICT_VERSION,
WEAKREF_ALIVE) keeps the frame out of the cache."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from aotcache.frames import content

IDENTITY_GUARDS = ("ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH", "CLOSURE_MATCH")
_IDENTITY = set(IDENTITY_GUARDS)


def portable(builder: Any, guard: Any) -> Any:
    """`guard`, or its content-guard replacement when it guards identity. Raises content.Unportable.

    Beyond the guards Dynamo refuses, BUILTIN_MATCH and any guard built on an identity check (a CONSTANT_MATCH on
    a code object, say) are replaced too: Dynamo serializes them, but rebuilds them in the loading process from the
    object found there, so the identity they test is the loading process's own and always holds (a builtin
    monkeypatched before the call would pass). TYPE_MATCH stays: the type is resolved by its importable name, and
    the code Dynamo inlined from it is checked by its source file."""
    kind = guard.create_fn_name()
    derived = set(guard.guard_types or ())
    if kind not in IDENTITY_GUARDS and kind != "BUILTIN_MATCH" and (kind == "TYPE_MATCH" or not derived & _IDENTITY):
        return guard
    description = content.describe(builder.get(guard))
    return dataclasses.replace(
        guard, create_fn=functools.partial(aotcache_content_match, kind, description), guard_types=None
    )


def aotcache_content_match(kind: str, description: tuple, builder: Any, guard: Any) -> None:
    """The guard builder's method for a content guard (called by Dynamo when it rebuilds the guards of a loaded
    frame): a leaf guard on the guarded value that holds when `content.matches` does. An object that matched once
    is remembered, so later calls cost one identity test (the identity Dynamo's own guard would have tested)."""
    matched: list[Any] = []

    def check(value: Any) -> bool:
        if matched and value is matched[0]:
            return True
        if content.matches(description, value):
            matched[:] = [value]
            return True
        return False

    what = " ".join(str(part) for part in description[:3])
    builder.get_guard_manager(guard).add_lambda_guard(
        check, [f"aotcache content match ({kind}) of {guard.name}: {what}"], guard.user_stack
    )


def keep_builtins(check_fn_manager: Any, carried: list[Any], output_graph: Any) -> None:
    """Dynamo serializes only the builtins its BUILTIN_MATCH guards read; a content guard on a builtin (one Dynamo
    guarded by FUNCTION_MATCH, say) must find it in the serialized builtins dict too."""
    from torch._dynamo.source import DictGetItemSource, GlobalSource

    name = getattr(output_graph, "name_of_builtins_dict_key_in_fglobals", None)
    if not name:
        return
    for guard in carried:
        source = guard.originating_source
        while source is not None:
            if (
                isinstance(source, DictGetItemSource)
                and isinstance(source.base, GlobalSource)
                and source.base.global_name == name
                and isinstance(source.index, str)
            ):
                check_fn_manager.used_builtin_vars.add(source.index)
            source = getattr(source, "base", None)
