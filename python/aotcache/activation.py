"""The one activation of aotcache in a process, at the first compile that asks for it: Dynamo looks the backend up
(`torch.compile(backend="aotcache")` through the package's entry point, `aotcache.aotcache_backend`, or the default
backend routed by `aotcache.enable()`) before it converts the first frame, and that lookup calls `activate()`. No
module of aotcache changes torch or the process when it is imported (tests/python/project/test_layers.py).

Activation installs the frame cache's hooks into Dynamo when the settings ask for frames (the default), and from
then on installs them when a later `configure(frames=True)` does.
"""

from __future__ import annotations

import os
import threading

from aotcache import settings

_lock = threading.Lock()
_active = False


def activate() -> None:
    """Idempotent and cheap after the first call; never raises (a failure leaves the frame cache off, counted)."""
    global _active
    if _active:
        return
    with _lock:
        if _active:
            return
        _active = True
        settings.on_configure(_configured)
        _configured(settings.current())


def _configured(current: settings.Settings) -> None:
    if current.frames or os.environ.get("AOTCACHE_FRAMES_GUARD_LOG"):  # the guard log is a test hook
        from aotcache import frames

        frames.enable()
