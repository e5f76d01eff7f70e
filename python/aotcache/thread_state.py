"""Per-thread state set for the extent of a `with` block: the pass-throughs installed once in torch's modules take
their aotcache path only while such state is set on the calling thread (a compile's capture, a load's bindings)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def set_on_thread(slot: threading.local, **values: Any) -> Iterator[None]:
    """Sets each attribute of `slot` for this thread inside, restoring what an enclosing block had set (None)."""
    outer = {name: getattr(slot, name, None) for name in values}
    for name, value in values.items():
        setattr(slot, name, value)
    try:
        yield
    finally:
        for name, value in outer.items():
            setattr(slot, name, value)
