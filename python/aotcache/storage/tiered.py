"""The cache's tiers in one place: the local store, then the remote tier, with backfill and publish.

A read looks in the local store; on a miss it asks the remote tier, whose entry is verified and written into the
local store in one step (`LocalStore.put_encoded_entry` checks its checksum, key and signature in C++ and returns
the decoded entry: each entry is decoded once). A write goes to
the local store, then to the remote tier. Every entry fault is classified here, once, into a counted reason and
whether this process may write the key (an entry of a newer aotcache or one signed by a key we do not accept is left
to its owner). Faults of the remote tier are remote.py's: counted, never raised.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from aotcache import _core, counters
from aotcache.settings import RemoteSettings
from aotcache.storage import remote

log = logging.getLogger("aotcache")


@dataclasses.dataclass(frozen=True)
class Read:
    """The result of a read: the verified entry or None, and whether a new compile may be stored under the key."""

    entry: _core.LoadedEntry | None
    writable: bool = True


class TieredStore:
    """The local store with the remote tier (or none) behind it, for one compile."""

    def __init__(self, local: _core.LocalStore, remote_settings: RemoteSettings | None) -> None:
        self.local = local
        self.remote_settings = remote_settings

    def get(self, key_hex: str, on_remote: Callable[[], None] | None = None) -> Read:
        """The entry of `key_hex` from the first tier that has it: the local store, else the remote tier (the entry
        verified and written into the local store on the way). The remote tier is asked only when the local store
        has no entry and a new one may be stored under the key; `on_remote()` is called first (the pipeline's phase).
        """
        read = self.get_local(key_hex)
        if read.entry is None and read.writable:
            if on_remote is not None:
                on_remote()
            fetched = self.get_remote(key_hex)
            if fetched is not None:
                return Read(fetched)
        return read

    def get_remote(self, key_hex: str) -> _core.LoadedEntry | None:
        """The remote entry of `key_hex` alone, verified and written into the local store on the way (decoded once),
        or None (a guard index is merged with the local one: both are read)."""
        return remote.fetch(self.local, key_hex, self.remote_settings)

    def put(
        self, key: _core.CacheKey, payload: bytes, metadata: dict[str, Any], graph: bytes = b"", kernels: bytes = b""
    ) -> int:
        """Writes the entry locally, then publishes it to the remote tier; the bytes written locally. Raises
        CacheError when the local write fails (the remote tier never raises)."""
        written = self.local.put(key, payload, metadata, graph, kernels)
        self.publish(key.hex)
        return written

    def publish(self, key_hex: str) -> None:
        """Sends the local entry of `key_hex` to the remote tier (when one is set and writable). Never raises."""
        remote.publish(self.local, key_hex, self.remote_settings)

    def get_local(self, key_hex: str) -> Read:
        """The local entry of `key_hex` alone; faults are classified and counted here, never raised."""
        store = self.local
        try:
            return Read(store.get(key_hex))
        except _core.IncompatibleEntryError as e:
            # Written by a newer aotcache sharing the directory: leave it to its owner, do not overwrite it.
            log.warning("entry %s is not readable by this version, compiling without storing: %s", key_hex[:16], e)
            counters.record({"errors": 1, "error.incompatible_entry": 1}, store)
            return Read(None, writable=False)
        except _core.UntrustedEntryError as e:
            # Signed by a key this process does not accept (or not signed): another key set's entry during a
            # rotation, or a planted one; or unsigned in a file another user could have written. Nothing of it was
            # loaded; it stays where it is, for the keys (or the owner) that accept it.
            counters.warn_once("untrusted", "entry %s is not trusted, compiling: %s", key_hex[:16], e)
            counters.record({"untrusted": 1, "error.untrusted_entry": 1}, store)
            return Read(None, writable=False)
        except _core.CorruptEntryError as e:
            # The store has moved it to quarantine/ (counted there as `corrupt`).
            log.warning("entry %s is corrupt, recompiling: %s", key_hex[:16], e)
            counters.record({"errors": 1, "error.corrupt_entry": 1}, store)
            return Read(None)
        except _core.CacheError as e:
            counters.warn_once("store_read", "cannot read entry %s, recompiling: %s", key_hex[:16], e)
            counters.record({"errors": 1, "error.store_read": 1}, store)
            return Read(None)
