"""AOTCACHE_ENABLE=1 at interpreter start: routes torch.compile's default backend through aotcache once torch is
imported (default_backend.enable()), without importing torch itself.

Imported by `aotcache-enable.pth` (installed beside the package in site-packages), whose single line costs an
environment lookup in every interpreter of the environment and imports this module only when AOTCACHE_ENABLE is
set to a true value (1, true, yes, on). `aotcache run -- <command>` sets it for a process tree.

When torch is already imported (a .pth read late, or `import aotcache.startup` by hand), enable() runs now. Otherwise
a finder on sys.meta_path waits for the import of `torch` and runs enable() right after torch's own module code has
run, before the importer gets the module back; it then leaves sys.meta_path. Nothing here raises: a failure is one
WARNING and the program runs on plain inductor.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from typing import Any

log = logging.getLogger("aotcache")

_TRUE = {"1", "true", "yes", "on"}


def requested(environ: Any = os.environ) -> bool:
    return environ.get("AOTCACHE_ENABLE", "").strip().lower() in _TRUE


def _enable() -> None:
    try:
        from aotcache import default_backend

        default_backend.enable()
    except Exception as e:  # noqa: BLE001 - never into the user's program
        log.warning("AOTCACHE_ENABLE: cannot route torch.compile through aotcache, running without it: %r", e)


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: at the import of `torch` it asks the finders after it for the spec and makes the loader
    run enable() after torch's module code."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        _remove_finder()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_enable(module: Any) -> None:
            exec_module(module)
            _enable()

        try:
            loader.exec_module = exec_then_enable  # type: ignore[union-attr] - this spec's loader only
        except Exception:  # noqa: BLE001 - a loader that takes no attributes: enable at the next compile instead
            return spec
        return spec


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterTorchImport)]


def install() -> None:
    try:
        if "torch" in sys.modules:
            _enable()
        elif not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _AfterTorchImport())
    except Exception as e:  # noqa: BLE001
        log.warning("AOTCACHE_ENABLE: cannot route torch.compile through aotcache, running without it: %r", e)


if requested():
    install()
