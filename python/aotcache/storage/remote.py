"""The remote tier (docs/guide/remote-tier.md): a Redis cache shared by machines, behind the local store.

The backend calls `fetch` after a local miss and `publish` after a local put. Remote entries are the exact bytes of
entry files; a fetched entry enters the local store through `LocalStore.put_encoded`, which verifies its checksum,
its key and, with `AOTCACHE_SIGNING_KEY` set, its signature in C++ before any byte of it reaches Python. A remote
fault never fails a compile: it costs at most the timeouts, is counted (`remote.*`), logged once per kind, and the
failing server is skipped for `AOTCACHE_REMOTE_DOWN_SECONDS`.

Settings: `settings.RemoteSettings` (AOTCACHE_REMOTE and AOTCACHE_REMOTE_*, or `aotcache.configure(remote=...)`).
"""

from __future__ import annotations

import logging
import threading
import time

from aotcache import _core, counters
from aotcache.settings import RemoteSettings

log = logging.getLogger("aotcache")

_lock = threading.Lock()
_remotes: dict[RemoteSettings, _core.RemoteStore | None] = {}
# Keys whose remote entry this process fetched and rejected (forged, corrupt, unreadable) and has not replaced yet:
# its presence on the server says nothing about a usable entry (single_flight.py).
_unusable: set[str] = set()


def holds_unusable(key_hex: str) -> bool:
    """Whether this process rejected the remote entry of `key_hex` and has not published a replacement."""
    with _lock:
        return key_hex in _unusable


def _mark_unusable(key_hex: str, unusable: bool) -> None:
    with _lock:
        if unusable:
            _unusable.add(key_hex)
        else:
            _unusable.discard(key_hex)


def current(cfg: RemoteSettings | None) -> tuple[_core.RemoteStore | None, RemoteSettings | None]:
    """The remote store for `cfg` (a compile's settings snapshot), opened once per process and settings;
    (None, None) when off (`cfg` None) or misconfigured (reported once)."""
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


def record(delta: dict[str, int], remote: _core.RemoteStore, store: _core.LocalStore) -> None:
    delta = dict(delta)
    for name, value in remote.take_counters().items():
        delta[name] = delta.get(name, 0) + value
    if delta:
        counters.record(delta, store)


def fetch(store: _core.LocalStore, key_hex: str, cfg: RemoteSettings | None) -> _core.LoadedEntry | None:
    """After a local miss: looks the key up remotely and, on a verified hit, writes the entry into the local store
    and returns it, decoded once (`put_encoded_entry`); None otherwise. Never raises."""
    remote, _ = current(cfg)
    if remote is None:
        return None
    delta: dict[str, int] = {}
    try:
        t0 = time.perf_counter()
        try:
            data = remote.get(key_hex)
        except _core.CacheError as e:
            delta["remote.errors"] = 1
            counters.warn_once("remote_get", "remote tier unavailable, compiling locally: %s", e)
            return None
        finally:
            delta["remote.get_us"] = int((time.perf_counter() - t0) * 1e6)
        if data is None:
            delta["remote.misses"] = 1
            return None
        try:
            entry = store.put_encoded_entry(data, key_hex)
        except _core.UntrustedEntryError as e:
            _mark_unusable(key_hex, True)
            delta["remote.rejected_signature"] = 1
            counters.warn_once("remote_untrusted", "remote entry %s rejected, recompiling: %s", key_hex[:16], e)
            return None
        except _core.CorruptEntryError as e:
            _mark_unusable(key_hex, True)
            delta["remote.corrupt"] = 1
            counters.warn_once("remote_corrupt", "remote entry %s is corrupt, recompiling: %s", key_hex[:16], e)
            return None
        except _core.IncompatibleEntryError as e:
            _mark_unusable(key_hex, True)
            delta["remote.incompatible"] = 1
            counters.warn_once("remote_incompatible", "remote entry %s is not readable here: %s", key_hex[:16], e)
            return None
        except _core.CacheError as e:
            delta["remote.backfill_errors"] = 1
            counters.warn_once("remote_backfill", "cannot store remote entry %s locally: %s", key_hex[:16], e)
            return None
        delta.update({"remote.hits": 1, "remote.bytes_read": len(data)})
        log.info("remote hit key=%s bytes=%d get=%.1fms", key_hex[:16], len(data), delta["remote.get_us"] / 1e3)
        return entry
    except Exception:  # the remote tier must never fail a compile
        log.warning("internal error in the remote tier", exc_info=True)
        delta["remote.errors"] = delta.get("remote.errors", 0) + 1
        return None
    finally:
        record(delta, remote, store)


def publish(store: _core.LocalStore, key_hex: str, cfg: RemoteSettings | None) -> None:
    """After a local put: sends the entry file's bytes (already signed when a key is set) to the remote tier, unless
    it is read-only. Never raises."""
    remote, cfg = current(cfg)
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
        _mark_unusable(key_hex, False)
        delta.update({"remote.puts": 1, "remote.bytes_written": len(data)})
    except Exception:
        log.warning("internal error in the remote tier", exc_info=True)
        delta["remote.errors"] = delta.get("remote.errors", 0) + 1
    finally:
        record(delta, remote, store)


def reset() -> None:
    """Forgets the opened remote stores (tests)."""
    with _lock:
        _remotes.clear()
        _unusable.clear()
