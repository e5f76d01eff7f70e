"""Which stored graph entry a compiled callable came from: the backend tags what it returns, the frame recorder
reads the tag off the globals Dynamo installed. A callable without a tag (bypassed graph, a plain compile, one
bound to lifted state) makes its frame not frame-cacheable."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_tags: dict[int, tuple[Any, dict[str, Any]]] = {}


def tag(fn: Any, entry_key: str, single: bool) -> None:
    """Remember that `fn` is the artifact of entry `entry_key` (`single`: unwrapped from a 1-tuple). Holds `fn`, so
    its id is not reused while the tag lives (Dynamo holds it as long anyway)."""
    with _lock:
        _tags[id(fn)] = (fn, {"key": entry_key, "single": bool(single)})


def lookup(fn: Any) -> dict[str, Any] | None:
    with _lock:
        found = _tags.get(id(fn))
    return dict(found[1]) if found is not None and found[0] is fn else None
