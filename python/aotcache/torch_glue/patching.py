"""Replacing torch's functions, all or nothing: the one way aotcache installs a pass-through into torch.

A `Patches` names the attributes it replaces (an owner, an attribute, the replacement). `install()` replaces them
in order; if one fails (an attribute gone, a class that refuses the assignment), the ones already replaced are put
back before it returns False, so torch is never left half patched. `uninstall()` restores every original. A
replacement marks itself with `_aotcache_replaces` (the original) where a probe must still find torch's own function
after the install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("aotcache")

_MISSING = object()


@dataclasses.dataclass
class _Replacement:
    owner: Any
    attr: str
    new: Any
    old: Any = _MISSING


class Patches:
    """The replacements of one feature (`name` for the log), installed together or not at all."""

    def __init__(self, name: str):
        self.name = name
        self._replacements: list[_Replacement] = []
        self._lock = threading.Lock()
        self.installed = False

    def replace(self, owner: Any, attr: str, new: Any) -> Patches:
        """Adds `owner.attr = new` to the set (before `install`). The original is read at install time, from the
        owner's own __dict__ for a class (a classmethod or staticmethod stays what it was; an inherited attribute
        is deleted again on uninstall)."""
        if self.installed:
            raise RuntimeError(f"{self.name}: installed already")
        self._replacements.append(_Replacement(owner, attr, new))
        return self

    def install(self) -> bool:
        """Replaces every attribute of the set; on any failure restores those done and returns False."""
        with self._lock:
            if self.installed:
                return True
            done: list[_Replacement] = []
            try:
                for r in self._replacements:
                    if isinstance(r.owner, type):
                        r.old = r.owner.__dict__.get(r.attr, _MISSING)
                    else:
                        r.old = getattr(r.owner, r.attr)
                    setattr(r.owner, r.attr, r.new)
                    done.append(r)
            except Exception:
                log.warning(
                    "aotcache: %s: torch could not be patched; nothing of it stays patched", self.name, exc_info=True
                )
                for r in reversed(done):
                    _restore(r)
                return False
            self.installed = True
            return True

    def uninstall(self) -> None:
        """Restores every original, in reverse order."""
        with self._lock:
            if not self.installed:
                return
            for r in reversed(self._replacements):
                _restore(r)
            self.installed = False

    @contextlib.contextmanager
    def applied(self) -> Iterator[bool]:
        """Installed for the block (True), or not at all (False); uninstalled after it, whatever happens."""
        ok = self.install()
        try:
            yield ok
        finally:
            if ok:
                self.uninstall()


def _restore(r: _Replacement) -> None:
    if r.old is _MISSING:
        delattr(r.owner, r.attr)
    else:
        setattr(r.owner, r.attr, r.old)
