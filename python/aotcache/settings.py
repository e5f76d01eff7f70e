"""User settings: environment variables, overridable from Python with `aotcache.configure()`."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading

from aotcache import _core

_TRUE = {"1", "true", "yes", "on"}
log = logging.getLogger("aotcache")


@dataclasses.dataclass(frozen=True)
class Settings:
    cache_dir: str
    """Where entries live. `AOTCACHE_DIR`, default `~/.cache/aotcache`."""
    enabled: bool
    """False compiles every graph normally (counted as bypass `disabled`). `AOTCACHE_DISABLE=1` turns it off."""
    salt: str
    """Enters the `user` key component: change it to invalidate every entry. `AOTCACHE_SALT`."""
    max_size: int
    """Bound of the cache directory in bytes, kept by LRU eviction. `AOTCACHE_MAX_SIZE` (10G, 500M, ...), default
    10 GiB; 0 = unbounded."""


_lock = threading.Lock()
_overrides: dict[str, object] = {}


def _max_size_from_environment() -> int:
    text = os.environ.get("AOTCACHE_MAX_SIZE", "").strip()
    if not text:
        return _core.DEFAULT_MAX_SIZE
    try:
        return _core.parse_size(text)
    except _core.CacheError as e:
        log.warning("ignoring AOTCACHE_MAX_SIZE=%r: %s", text, e)
        return _core.DEFAULT_MAX_SIZE


def _from_environment() -> Settings:
    return Settings(
        cache_dir=_core.default_cache_dir(),
        enabled=os.environ.get("AOTCACHE_DISABLE", "").strip().lower() not in _TRUE,
        salt=os.environ.get("AOTCACHE_SALT", ""),
        max_size=_max_size_from_environment(),
    )


def current() -> Settings:
    """The settings in force: the environment, read at each compile, with `configure()` overrides on top."""
    with _lock:
        return dataclasses.replace(_from_environment(), **_overrides)


def configure(
    *,
    cache_dir: str | None = None,
    enabled: bool | None = None,
    salt: str | None = None,
    max_size: int | str | None = None,
) -> Settings:
    """Overrides settings for this process; `None` leaves a setting as it is. Returns the settings in force."""
    if isinstance(max_size, str):
        max_size = _core.parse_size(max_size)
    with _lock:
        for name, value in (("cache_dir", cache_dir), ("enabled", enabled), ("salt", salt), ("max_size", max_size)):
            if value is not None:
                _overrides[name] = os.path.abspath(os.path.expanduser(value)) if name == "cache_dir" else value
    return current()


def reset() -> None:
    """Drops every `configure()` override."""
    with _lock:
        _overrides.clear()
