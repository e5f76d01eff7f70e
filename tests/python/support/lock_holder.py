"""Holds a key's compile lock like a process that is compiling it, until killed: `python lock_holder.py local DIR KEY`
(the cache directory's file lock) or `python lock_holder.py remote URL KEY LEASE_MS` (a remote lease, renewed as the
backend renews it). Prints HELD once it holds it."""

from __future__ import annotations

import sys
import time

from aotcache import _core
from aotcache.storage import single_flight


def main() -> None:
    kind, where, key = sys.argv[1:4]
    if kind == "local":
        lock = _core.LocalStore.open(where).try_compile_lock(key)
        assert lock is not None, "the lock is already held"
    else:
        store = _core.RemoteStore.open(where)
        token = single_flight._token()
        assert store.try_lease(key, token, int(sys.argv[4])), "the lease is already held"
        lease = single_flight._Lease(store, key, token, int(sys.argv[4]))  # noqa: F841 (renewed until killed)
    print("HELD", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
