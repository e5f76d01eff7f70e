"""The stores of this process: each cache directory opened once per set of options, shared by the backend and the
frame cache."""

from __future__ import annotations

import logging
import threading

from aotcache import _core, counters, settings
from aotcache.storage import trust
from aotcache.storage.tiered import TieredStore

log = logging.getLogger("aotcache")

_stores_lock = threading.Lock()
_stores: dict[tuple, _core.LocalStore] = {}
_unavailable: set[tuple] = set()
_untrusted: dict[
    tuple, trust.Distrust | str
] = {}  # per store: why another user could have written it ("" when none could)
# Folders of a cache directory that hold only what any process can rebuild: discarded when another user could have
# written them, instead of refusing the directory (isa_probe.MEMO_DIR; a test checks they agree).
MEMO_DIRS = ("probes",)


def tiers(cfg: settings.Settings) -> TieredStore | None:
    """The local store of `cfg` with its remote tier, or None when the directory cannot be used."""
    local = local_store(cfg)
    return TieredStore(local, cfg.remote) if local is not None else None


def store_id(cfg: settings.Settings) -> tuple:
    """What identifies an opened store: its directory and the options it was opened with (eviction, signing keys);
    the size bound is applied to the open store at each compile."""
    return (cfg.cache_dir, cfg.eviction, cfg.signing_key, cfg.accepted_keys)


def local_store(cfg: settings.Settings) -> _core.LocalStore | None:
    """The store of the cache directory, opened once per process and options; None (reported once) when it cannot
    be used (unusable directory, malformed signing keys: the cache is off rather than unsigned), or when entries
    are unsigned and another user could have written the directory (storage/trust.py; counted `untrusted`)."""
    ident = store_id(cfg)
    with _stores_lock:
        store = _stores.get(ident)
        if store is None:
            try:
                store = settings.open_store(cfg)
            except _core.CacheError as e:
                if ident not in _unavailable:
                    _unavailable.add(ident)
                    log.warning("cache directory %s is unusable, compiling without cache: %s", cfg.cache_dir, e)
                return None
            _stores[ident] = store
        if cfg.signing_key is None:
            verdict = _untrusted.get(ident)
            if verdict is None:
                trust.discard_open_memos(cfg.cache_dir, MEMO_DIRS)
                verdict = _untrusted[ident] = trust.judge(cfg.cache_dir) or ""
            if verdict:
                counters.record({"untrusted": 1}, None)
                counters.warn_once(
                    f"untrusted:{cfg.cache_dir}",
                    "cache directory %s is not used: its unsigned entries carry code, and %s; to use it, %s, %s",
                    cfg.cache_dir,
                    verdict.reason,
                    verdict.fix,
                    trust.SIGNING_ADVICE,
                )
                return None
        store.set_max_size(cfg.max_size)
        return store


def install(cfg: settings.Settings, store: _core.LocalStore) -> None:
    """Uses `store` for `cfg` from now on (tests: a store opened with a fault injected)."""
    with _stores_lock:
        _stores[store_id(cfg)] = store
