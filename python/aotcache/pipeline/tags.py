"""Which stored graph entry a compiled callable came from: the backend tags what it returns, the frame recorder
reads the tag off the globals Dynamo installed. A callable without a tag (bypassed graph, a plain compile, one
bound to lifted state) makes its frame not frame-cacheable."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_backend_time = threading.local()
_tags: dict[int, tuple[Any, dict[str, Any], tuple | None]] = {}
_mesh_coordinate: dict[int, Any] = {}  # id -> the callable, for graphs whose key holds the rank's mesh coordinate


def tag(
    fn: Any,
    entry_key: str,
    single: bool,
    input_sources: tuple | None = None,
    index_key: str | None = None,
    mesh_coordinate: bool = False,
) -> None:
    """Remember that `fn` is the artifact of entry `entry_key` (`single`: unwrapped from a 1-tuple), compiled from a
    graph whose placeholders Dynamo bound to `input_sources` (its Source objects; None when unknown); `index_key`:
    the guard index the entry is a candidate of (symbolic graphs); `mesh_coordinate`: the entry's key holds this rank's
    coordinate in its device meshes (a DTensor graph whose code depends on the rank). Holds `fn`, so its id is not
    reused while the tag lives (Dynamo holds it as long anyway)."""
    described = {"key": entry_key, "single": bool(single)}
    if index_key is not None:
        described["index"] = index_key
    with _lock:
        _tags[id(fn)] = (fn, described, input_sources)
        if mesh_coordinate:
            _mesh_coordinate[id(fn)] = fn


def _found(fn: Any) -> tuple[Any, dict[str, Any], tuple | None] | None:
    with _lock:
        found = _tags.get(id(fn))
    return found if found is not None and found[0] is fn else None


def lookup(fn: Any) -> dict[str, Any] | None:
    """What a frame entry records of the graph `fn` is the artifact of (its entry key and output shape)."""
    found = _found(fn)
    return dict(found[1]) if found is not None else None


def input_sources(fn: Any) -> tuple | None:
    """The sources of the graph inputs of `fn` (this process only), or None when unknown."""
    found = _found(fn)
    return found[2] if found is not None else None


def mesh_coordinate(fn: Any) -> bool:
    """Whether the key of the graph `fn` is the artifact of holds this rank's mesh coordinate."""
    with _lock:
        return _mesh_coordinate.get(id(fn)) is fn


def add_backend_seconds(seconds: float) -> None:
    """The backend spent `seconds` on one graph (this thread): a frame's own compile time leaves its graphs' out."""
    _backend_time.total = backend_seconds() + seconds


def backend_seconds() -> float:
    """Seconds this thread has spent in the aotcache backend so far."""
    return getattr(_backend_time, "total", 0.0)
