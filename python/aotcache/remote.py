"""The remote tier (README "Shared cache (remote tier)"): a Redis cache shared by machines, behind the local store.

The backend calls `fetch` after a local miss and `publish` after a local put. Remote entries are the exact bytes of
entry files; a fetched entry enters the local store through `LocalStore.put_encoded`, which verifies its checksum,
its key and, with `AOTCACHE_SIGNING_KEY` set, its signature in C++ before any byte of it reaches Python. A remote
fault never fails a compile: it costs at most the timeouts, is counted (`remote.*`), logged once per kind, and the
failing server is skipped for `AOTCACHE_REMOTE_DOWN_SECONDS`.

Environment: AOTCACHE_REMOTE (comma-separated redis:// or redis+unix:// URLs; unset = no remote tier),
AOTCACHE_REMOTE_READONLY=1, AOTCACHE_REMOTE_PREFIX (default "aotcache:"), AOTCACHE_REMOTE_TTL (seconds, or 30m,
12h, 7d; default none), AOTCACHE_REMOTE_CONNECT_TIMEOUT_MS (500), AOTCACHE_REMOTE_TIMEOUT_MS (1000),
AOTCACHE_REMOTE_MAX_ENTRY_SIZE (128M), AOTCACHE_REMOTE_DOWN_SECONDS (30).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from aotcache import _core, counters

log = logging.getLogger("aotcache")

_TRUE = {"1", "true", "yes", "on"}
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclasses.dataclass(frozen=True)
class RemoteSettings:
    urls: str
    readonly: bool
    key_prefix: str
    ttl_seconds: int
    connect_timeout_ms: int
    operation_timeout_ms: int
    max_entry_bytes: int
    down_seconds: int


_lock = threading.Lock()
_remotes: dict[RemoteSettings, _core.RemoteStore | None] = {}


def _seconds(text: str) -> int:
    text = text.strip().lower()
    if text and text[-1] in _AGE_UNITS:
        return int(float(text[:-1]) * _AGE_UNITS[text[-1]])
    return int(text)


def settings_from_environment() -> RemoteSettings | None:
    """The remote settings in force, or None when AOTCACHE_REMOTE is unset. Raises ValueError or CacheError for a
    malformed value."""
    urls = os.environ.get("AOTCACHE_REMOTE", "").strip()
    if not urls:
        return None
    env = os.environ.get
    return RemoteSettings(
        urls=urls,
        readonly=env("AOTCACHE_REMOTE_READONLY", "").strip().lower() in _TRUE,
        key_prefix=env("AOTCACHE_REMOTE_PREFIX", "aotcache:"),
        ttl_seconds=_seconds(env("AOTCACHE_REMOTE_TTL", "0") or "0"),
        connect_timeout_ms=int(env("AOTCACHE_REMOTE_CONNECT_TIMEOUT_MS", "500") or "500"),
        operation_timeout_ms=int(env("AOTCACHE_REMOTE_TIMEOUT_MS", "1000") or "1000"),
        max_entry_bytes=_core.parse_size(env("AOTCACHE_REMOTE_MAX_ENTRY_SIZE", "128M") or "128M"),
        down_seconds=int(env("AOTCACHE_REMOTE_DOWN_SECONDS", "30") or "30"),
    )


def _current() -> tuple[_core.RemoteStore | None, RemoteSettings | None]:
    """The remote store for the settings in force, opened once per process and settings; (None, None) when off or
    misconfigured (reported once)."""
    try:
        cfg = settings_from_environment()
    except (ValueError, _core.CacheError) as e:
        counters.warn_once("remote_config", "remote tier is misconfigured, not used: %s", e)
        return None, None
    if cfg is None:
        return None, None
    with _lock:
        if cfg not in _remotes:
            try:
                _remotes[cfg] = _core.RemoteStore.open(
                    cfg.urls,
                    key_prefix=cfg.key_prefix,
                    ttl_seconds=cfg.ttl_seconds,
                    connect_timeout_ms=cfg.connect_timeout_ms,
                    operation_timeout_ms=cfg.operation_timeout_ms,
                    max_entry_bytes=cfg.max_entry_bytes,
                    down_seconds=cfg.down_seconds,
                )
            except _core.CacheError as e:
                counters.warn_once("remote_config", "remote tier %s is misconfigured, not used: %s", cfg.urls, e)
                _remotes[cfg] = None
        return _remotes[cfg], cfg


def _record(delta: dict[str, int], remote: _core.RemoteStore, store: _core.LocalStore) -> None:
    delta = dict(delta)
    for name, value in remote.take_counters().items():
        delta[name] = delta.get(name, 0) + value
    if delta:
        counters.record(delta, store)


def fetch(store: _core.LocalStore, key_hex: str) -> bool:
    """After a local miss: looks the key up remotely and, on a verified hit, writes the entry into the local store.
    True when the local store now holds the entry. Never raises."""
    remote, _ = _current()
    if remote is None:
        return False
    delta: dict[str, int] = {}
    try:
        t0 = time.perf_counter()
        try:
            data = remote.get(key_hex)
        except _core.CacheError as e:
            delta["remote.errors"] = 1
            counters.warn_once("remote_get", "remote tier unavailable, compiling locally: %s", e)
            return False
        finally:
            delta["remote.get_us"] = int((time.perf_counter() - t0) * 1e6)
        if data is None:
            delta["remote.misses"] = 1
            return False
        try:
            stored_key = store.put_encoded(data)
        except _core.UntrustedEntryError as e:
            delta["remote.rejected_signature"] = 1
            counters.warn_once("remote_untrusted", "remote entry %s rejected, recompiling: %s", key_hex[:16], e)
            return False
        except _core.CorruptEntryError as e:
            delta["remote.corrupt"] = 1
            counters.warn_once("remote_corrupt", "remote entry %s is corrupt, recompiling: %s", key_hex[:16], e)
            return False
        except _core.IncompatibleEntryError as e:
            delta["remote.incompatible"] = 1
            counters.warn_once("remote_incompatible", "remote entry %s is not readable here: %s", key_hex[:16], e)
            return False
        except _core.CacheError as e:
            delta["remote.backfill_errors"] = 1
            counters.warn_once("remote_backfill", "cannot store remote entry %s locally: %s", key_hex[:16], e)
            return False
        if stored_key != key_hex:
            delta["remote.corrupt"] = 1
            counters.warn_once("remote_corrupt", "remote entry under %s is another key's entry", key_hex[:16])
            return False
        delta.update({"remote.hits": 1, "remote.bytes_read": len(data)})
        log.info("remote hit key=%s bytes=%d get=%.1fms", key_hex[:16], len(data), delta["remote.get_us"] / 1e3)
        return True
    except Exception:  # the remote tier must never fail a compile
        log.warning("internal error in the remote tier", exc_info=True)
        delta["remote.errors"] = delta.get("remote.errors", 0) + 1
        return False
    finally:
        _record(delta, remote, store)


def publish(store: _core.LocalStore, key_hex: str) -> None:
    """After a local put: sends the entry file's bytes (already signed when a key is set) to the remote tier, unless
    it is read-only. Never raises."""
    remote, cfg = _current()
    if remote is None or cfg is None or cfg.readonly:
        return
    delta: dict[str, int] = {}
    try:
        data = store.read_entry_file(key_hex)
        if data is None:
            return
        try:
            remote.put(key_hex, data)
        except _core.RemoteUnavailableError as e:
            delta["remote.errors"] = 1
            counters.warn_once("remote_put", "cannot store entry %s remotely: %s", key_hex[:16], e)
            return
        except _core.CacheError as e:  # refused by the size limit (counted remote.too_large by the store)
            counters.warn_once("remote_refused", "entry %s not stored remotely: %s", key_hex[:16], e)
            return
        delta.update({"remote.puts": 1, "remote.bytes_written": len(data)})
    except Exception:
        log.warning("internal error in the remote tier", exc_info=True)
        delta["remote.errors"] = delta.get("remote.errors", 0) + 1
    finally:
        _record(delta, remote, store)


def reset() -> None:
    """Forgets the opened remote stores (tests)."""
    with _lock:
        _remotes.clear()
