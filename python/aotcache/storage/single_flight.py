"""Compile once: when several processes miss the same key at once, one compiles and the others wait for its entry.

On one machine the compile lock is a file lock in the cache directory (`LocalStore.try_compile_lock`; the kernel
frees it when its holder dies). Across machines, the process that holds its machine's lock also takes a lease in the
remote tier (`RemoteStore.try_lease`: it expires unless renewed, so a dead holder frees it within the lease time).
A waiter polls for the entry, or for the lock's release, for at most `compile_wait_seconds`; then it compiles
itself (counted `wait.timeouts`). A waiter waits once: when the holder goes away without an entry (its compile could
not be stored, or it died), the waiters compile in parallel instead of queueing for the lock one after another. A
cache problem (lock file not creatable, Redis down) never blocks: the process compiles at once, as without
single-flight. docs/guide/remote-tier.md, "Compile once".

The backend's use (`backend.py`):

    claim = single_flight.claim(store, key_hex, cfg, until_entry=True)
    try:
        if claim.look_again: ... look the key up again (local, then remote) ...
        if still a miss: ... compile and store ...
    finally:
        claim.release()
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

from aotcache import _core, counters
from aotcache.settings import Settings
from aotcache.storage import remote

log = logging.getLogger("aotcache")

_FIRST_POLL_S = 0.01
_MAX_POLL_S = 0.25


class Claim:
    """The outcome of `claim`: the locks held (released by `release()`), whether the key should be looked up again
    before compiling, and how long this process waited."""

    def __init__(self) -> None:
        self.local_lock: _core.CompileLock | None = None
        self.lease: _Lease | None = None
        self.look_again = False
        self.waited = False  # another process held the lock, and this one waited for it
        self.waited_s = 0.0
        self.timed_out = False

    @property
    def leader(self) -> bool:
        """Whether this process compiles for the others (holds its machine's lock)."""
        return self.local_lock is not None

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        if self.local_lock is not None:
            self.local_lock.release()
            self.local_lock = None


class _Lease:
    """A held remote lease, renewed every third of its time by a daemon thread until released."""

    def __init__(self, store: _core.RemoteStore, key_hex: str, token: str, lease_ms: int) -> None:
        self._store, self._key, self._token, self._lease_ms = store, key_hex, token, lease_ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="aotcache-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self._lease_ms / 3000):
            try:
                if not self._store.renew_lease(self._key, self._token, self._lease_ms):
                    log.info("compile lease of key=%s expired; another machine may compile it too", self._key[:16])
                    return
            except _core.CacheError as e:
                log.debug("cannot renew the compile lease of %s: %s", self._key[:16], e)

    def release(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        try:
            self._store.release_lease(self._key, self._token)
        except _core.CacheError as e:  # it expires by itself
            log.debug("cannot release the compile lease of %s: %s", self._key[:16], e)


def _token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim(store: _core.LocalStore, key_hex: str, cfg: Settings, *, until_entry: bool) -> Claim:
    """Takes this key's compile lock, or waits for the process that holds it. `until_entry`: the holder's entry
    under `key_hex` ends the wait (a static graph); otherwise only the lock's release does (a symbolic graph's index,
    which exists before the holder's candidate is added). Never raises."""
    result = Claim()
    if cfg.compile_wait_seconds <= 0:
        return result
    t0 = time.monotonic()
    deadline = t0 + cfg.compile_wait_seconds
    try:
        _claim_local(store, key_hex, until_entry, deadline, result)
        if result.leader and not result.look_again:
            _claim_remote(store, key_hex, cfg, until_entry, deadline, result)
    except Exception:  # single-flight is an optimization: never fail or block a compile for it
        log.warning("internal error while waiting for another compile of %s", key_hex[:16], exc_info=True)
        counters.record({"errors": 1, "error.compile_lock": 1}, store)
    result.waited_s = time.monotonic() - t0
    if result.waited:
        delta = {"wait.waited": 1, "wait_us": int(result.waited_s * 1e6)}
        if result.timed_out:
            delta["wait.timeouts"] = 1
        counters.record(delta, store)
    return result


_EXCLUSIVE_WAIT_S = 10.0


@contextlib.contextmanager
def exclusive(store: _core.LocalStore, key_hex: str, wait_s: float = _EXCLUSIVE_WAIT_S) -> Iterator[bool]:
    """Holds `key_hex`'s lock on this machine while a read-modify-write of its entry runs (a frame entry's candidates:
    two ranks recording different candidates at once would otherwise keep only the last writer's). Waits at most
    `wait_s`; yields whether the lock is held (never raises for the lock: without it the write runs unprotected, as
    before, and the lost candidate is recorded again by the next trace that misses it)."""
    lock = None
    deadline = time.monotonic() + wait_s
    poll = _FIRST_POLL_S
    try:
        while True:
            lock = store.try_compile_lock(key_hex)
            if lock is not None or time.monotonic() >= deadline:
                break
            time.sleep(poll)
            poll = min(poll * 1.5, _MAX_POLL_S)
    except _core.CacheError as e:
        counters.warn_once("compile_lock", "cannot take the compile lock (writing without it): %s", e)
    try:
        yield lock is not None
    finally:
        if lock is not None:
            lock.release()


def _claim_local(store: _core.LocalStore, key_hex: str, until_entry: bool, deadline: float, result: Claim) -> None:
    poll = _FIRST_POLL_S
    waited = False
    while True:
        try:
            lock = store.try_compile_lock(key_hex)
        except _core.CacheError as e:  # read-only directory: no single-flight, compile at once
            counters.warn_once("compile_lock", "cannot take the compile lock (compiling without waiting): %s", e)
            counters.record({"errors": 1, "error.compile_lock": 1}, store)
            return
        if lock is not None:
            if waited:  # the holder is done: look again, and compile in parallel with the other waiters if needed
                lock.release()
                result.look_again = True
            else:
                result.local_lock = lock
                # A holder may have finished between our lookup and taking the lock.
                result.look_again = until_entry and store.contains(key_hex)
            return
        if not waited:
            log.info("key=%s is being compiled by another process; waiting for its entry", key_hex[:16])
            waited = result.waited = True
        if until_entry and store.contains(key_hex):
            result.look_again = True
            return
        if time.monotonic() >= deadline:
            result.timed_out = True
            result.look_again = True
            log.warning("gave up waiting for another process to compile key=%s; compiling it here", key_hex[:16])
            return
        time.sleep(poll)
        poll = min(poll * 1.5, _MAX_POLL_S)


def _claim_remote(
    store: _core.LocalStore, key_hex: str, cfg: Settings, until_entry: bool, deadline: float, result: Claim
) -> None:
    """This process holds its machine's lock: take the cluster's lease too, or wait for the machine that holds it
    (while holding the local lock, so this machine's other processes wait behind this one)."""
    if cfg.remote is None:
        return
    rstore, rcfg = remote.current(cfg.remote)
    if rstore is None or rcfg is None:
        return
    lease_ms = max(1, int(rcfg.lease_seconds * 1000))
    token = _token()
    delta: dict[str, int] = {}
    poll = _FIRST_POLL_S
    waited = False
    try:
        while True:
            if not rcfg.readonly and rstore.try_lease(key_hex, token, lease_ms):
                result.lease = _Lease(rstore, key_hex, token, lease_ms)
                entry, _ = rstore.probe(key_hex)
                # Published between our remote lookup and the lease (not the forged or corrupt entry this process
                # just rejected), or the holder we waited for is gone.
                result.look_again = (until_entry and entry and not remote.holds_unusable(key_hex)) or waited
                return
            entry, leased = rstore.probe(key_hex)
            entry = entry and not remote.holds_unusable(key_hex)
            if (until_entry and entry) or (not leased and (waited or rcfg.readonly)):
                result.look_again = entry or waited
                return
            if not waited:
                log.info("key=%s is being compiled on another machine; waiting for its entry", key_hex[:16])
                delta["remote.lease_waits"] = 1
                waited = result.waited = True
            if time.monotonic() >= deadline:
                result.timed_out = True
                result.look_again = True
                log.warning("gave up waiting for another machine to compile key=%s; compiling it here", key_hex[:16])
                return
            time.sleep(poll)
            poll = min(poll * 1.5, _MAX_POLL_S * 2)
    except _core.CacheError as e:  # Redis down or slow: compile here (bounded by the remote timeouts)
        delta["remote.errors"] = delta.get("remote.errors", 0) + 1
        counters.warn_once("remote_lease", "remote compile lease unavailable, compiling here: %s", e)
    finally:
        remote.record(delta, rstore, store)
