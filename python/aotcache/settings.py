"""User settings: environment variables, overridable from Python with `aotcache.configure()`."""

from __future__ import annotations

import dataclasses
import os
import threading

from aotcache import _core

_TRUE = {"1", "true", "yes", "on"}


@dataclasses.dataclass(frozen=True)
class Settings:
    cache_dir: str
    """Where entries live. `AOTCACHE_DIR`, default `~/.cache/aotcache`."""
    enabled: bool
    """False compiles every graph normally (counted as bypass `disabled`). `AOTCACHE_DISABLE=1` turns it off."""
    salt: str
    """Enters the `user` key component: change it to invalidate every entry. `AOTCACHE_SALT`."""


_lock = threading.Lock()
_overrides: dict[str, object] = {}


def _from_environment() -> Settings:
    return Settings(
        cache_dir=_core.default_cache_dir(),
        enabled=os.environ.get("AOTCACHE_DISABLE", "").strip().lower() not in _TRUE,
        salt=os.environ.get("AOTCACHE_SALT", ""),
    )


def current() -> Settings:
    """The settings in force: the environment, read at each compile, with `configure()` overrides on top."""
    with _lock:
        return dataclasses.replace(_from_environment(), **_overrides)


def configure(*, cache_dir: str | None = None, enabled: bool | None = None, salt: str | None = None) -> Settings:
    """Overrides settings for this process; `None` leaves a setting as it is. Returns the settings in force."""
    with _lock:
        for name, value in (("cache_dir", cache_dir), ("enabled", enabled), ("salt", salt)):
            if value is not None:
                _overrides[name] = os.path.abspath(os.path.expanduser(value)) if name == "cache_dir" else value
    return current()


def reset() -> None:
    """Drops every `configure()` override."""
    with _lock:
        _overrides.clear()
