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


def portable(builder: Any, guard: Any) -> Any:
    """`guard`, or its content-guard replacement when it guards identity. Raises content.Unportable."""
    kind = guard.create_fn_name()
    if kind not in IDENTITY_GUARDS:
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
