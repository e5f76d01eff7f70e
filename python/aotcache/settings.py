"""User settings: environment variables, overridable from Python with `aotcache.configure()`.

Every setting is read from the environment at each compile, so a change of the environment takes effect at the next
compile; `configure()` overrides win over the environment until `reset()`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any

from aotcache import _core

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
log = logging.getLogger("aotcache")

DEFAULT_COMPILE_WAIT_SECONDS = 600.0
DEFAULT_REMOTE_LEASE_SECONDS = 30.0
EVICTION_POLICIES = ("lru", "saved-per-byte")
DEFAULT_EVICTION = "lru"


@dataclasses.dataclass(frozen=True)
class RemoteSettings:
    """The remote tier (docs/guide/remote-tier.md); None in `Settings.remote` when it is off."""

    urls: str
    """Comma-separated redis://[[user]:password@]host[:port][/db] or redis+unix:///path[?db=N]. `AOTCACHE_REMOTE`."""
    readonly: bool = False
    """Look up only, never write (consumers that must not publish). `AOTCACHE_REMOTE_READONLY=1`."""
    key_prefix: str = "aotcache:"
    """Namespace of the keys on the server. `AOTCACHE_REMOTE_PREFIX`."""
    ttl_seconds: int = 0
    """Expiry of written entries; 0 = none. `AOTCACHE_REMOTE_TTL` (seconds, or 30m, 12h, 7d)."""
    connect_timeout_ms: int = 500
    """`AOTCACHE_REMOTE_CONNECT_TIMEOUT_MS`."""
    operation_timeout_ms: int = 1000
    """Per command. `AOTCACHE_REMOTE_TIMEOUT_MS`."""
    max_entry_bytes: int = 128 << 20
    """Larger entries are not sent (counted `remote.too_large`). `AOTCACHE_REMOTE_MAX_ENTRY_SIZE` (128M)."""
    down_seconds: int = 30
    """A failed server is skipped this long. `AOTCACHE_REMOTE_DOWN_SECONDS`."""
    lease_seconds: float = DEFAULT_REMOTE_LEASE_SECONDS
    """Expiry of a compile lease, renewed while the compile runs: a holder that dies frees it within this time.
    `AOTCACHE_REMOTE_LEASE` (seconds, or 1m, ...)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    cache_dir: str
    """Where entries live. `AOTCACHE_DIR`, default `~/.cache/aotcache`."""
    enabled: bool
    """False compiles every graph normally (counted as bypass `disabled`). `AOTCACHE_DISABLE=1` turns it off."""
    salt: str
    """Enters the `user` key component: change it to invalidate every entry. `AOTCACHE_SALT`."""
    max_size: int
    """Bound of the cache directory in bytes, kept by eviction after each put. `AOTCACHE_MAX_SIZE` (10G, 500M, ...),
    default 10 GiB; 0 = unbounded; any other bound is enforced, however small."""
    compile_wait_seconds: float = DEFAULT_COMPILE_WAIT_SECONDS
    """Compile once: when another process (or machine, through the remote tier) is compiling the same key, wait
    this long for its entry, then compile anyway. 0 = never wait. `AOTCACHE_COMPILE_WAIT` (seconds, or 10m, ...)."""
    remote: RemoteSettings | None = None
    """The remote tier, or None when off."""
    frames: bool = True
    """Cache Dynamo's frame results too (frames/): a warm start skips Dynamo's tracing of frames whose code,
    guards and context match. On by default; `AOTCACHE_FRAMES=0` turns it off."""
    verify_frames: bool = False
    """Audit the frame cache: every frame served from it is also traced by Dynamo, the served entry compared with
    that trace (code, globals and graph keys, guards, inlined sources, read set), a difference counted
    (`frames.verify.mismatch`) and logged, and Dynamo's result used. Costs a trace per served frame.
    `AOTCACHE_FRAMES_VERIFY=1`."""
    kernels: bool = True
    """Carry the compiled C++ kernels in entries and install them on a hit on a machine of the same build
    (`kernels.py`). `AOTCACHE_KERNELS=0` turns it off."""
    light_load: bool = True
    """Load a hit without importing Inductor's compiler, debug module or decompositions: the generated wrappers'
    imports are bound from a record checked when the graph was compiled, the graphs' unused reference to the
    decomposition table is swapped for a stand-in (`wrapper_loading.py`). `AOTCACHE_LIGHT_LOAD=0` turns it off
    (torch's own load path)."""
    isa_probe_memo: bool = True
    """Answer Inductor's vector-ISA probe from a per-machine memo in the cache directory (`isa_probe.py`).
    `AOTCACHE_ISA_PROBE_MEMO=0` turns it off."""
    eviction: str = DEFAULT_EVICTION
    """Which entries the size bound removes first: `lru` or `saved-per-byte` (docs/formats/store-layout.md §7.2).
    `AOTCACHE_EVICTION`."""
    signing_key: str | None = dataclasses.field(default=None, repr=False)
    """`id:secret` of the key that signs every entry written (docs/formats/entry-format.md §9), or None: entries
    unsigned and signatures unchecked. From `AOTCACHE_SIGNING_KEY`, whose further keys (`id:secret,id2:secret2`, the
    older spelling of a rotation) go to `accepted_keys`. Not shown in repr."""
    accepted_keys: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    """`id:secret` keys that verify entries besides the signing key (a rotation: the old key, or the next one
    before it signs). `AOTCACHE_SIGNING_KEYS_ACCEPTED` (comma-separated). Not shown in repr. Malformed keys are
    kept as given (and warned about once): opening a store with them fails, so the cache is not used rather than
    used unverified."""


_lock = threading.Lock()
_overrides: dict[str, object] = {}
_remote_overrides: dict[str, object] = {}
_remote_urls: list[str] = []  # [urls] when configure(remote=...) was called


def parse_seconds(text: str) -> float:
    """'90', '1.5', '30s', '10m', '12h', '7d', '2w' -> seconds. ValueError otherwise."""
    text = text.strip().lower()
    scale = 1
    if text and text[-1] in _AGE_UNITS:
        text, scale = text[:-1], _AGE_UNITS[text[-1]]
    value = float(text) * scale
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"not a duration: {text!r}")
    return value


def parse_bool(text: str) -> bool:
    """'1', 'true', 'yes', 'on' -> True; '0', 'false', 'no', 'off' -> False (any case); ValueError otherwise."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r} (use 1/0, true/false, yes/no, on/off)")


def _env_bool(name: str, default: bool) -> bool:
    """A boolean variable; unset or empty is `default`, a malformed value is reported once and `default` used."""
    return _env_or_default(name, parse_bool, default, f"bool_config.{name}")


def _env_or_default(name: str, parse, default, warn_kind: str):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except (ValueError, _core.CacheError) as e:
        from aotcache import counters  # counters does not import settings; imported here to keep layers simple

        counters.warn_once(warn_kind, "ignoring %s=%r: %s", name, text, e)
        return default


def _eviction(text: str) -> str:
    if text not in EVICTION_POLICIES:
        raise ValueError(f"unknown eviction policy (use {' or '.join(EVICTION_POLICIES)})")
    return text


def _signing_from_environment() -> tuple[str | None, tuple[str, ...]]:
    """(signing key, accepted keys) of AOTCACHE_SIGNING_KEY and AOTCACHE_SIGNING_KEYS_ACCEPTED."""
    signing = os.environ.get("AOTCACHE_SIGNING_KEY", "")
    accepted = os.environ.get("AOTCACHE_SIGNING_KEYS_ACCEPTED", "")
    try:
        _core.signing_key_ids(signing, [accepted])
    except _core.CacheError as e:
        from aotcache import counters

        # Fail closed: the values stay as given, so that LocalStore.open refuses them and no entry is read or
        # written unverified. Ignoring them would silently turn signing off.
        counters.warn_once(
            "signing_config", "AOTCACHE_SIGNING_KEY / AOTCACHE_SIGNING_KEYS_ACCEPTED unusable, cache not used: %s", e
        )
        return signing or None, (accepted,) if accepted else ()
    # Validated as given (a repeated id in one variable is refused), then the first key signs, the others verify.
    items = signing.split(",") if signing else []
    extra = accepted.split(",") if accepted else []
    return (items[0] if items else None), tuple(items[1:] + extra)


def store_options(cfg: Settings) -> dict[str, Any]:
    """Keyword arguments of `_core.LocalStore.open` (and `open_with_fault`) for `cfg`: the size bound, the eviction
    policy and the signing keys. Opening raises CacheError when the keys are malformed (see `accepted_keys`). The
    remote tier needs none of them: its entries are verified by `LocalStore.put_encoded` of a store opened so."""
    return {
        "max_size": cfg.max_size,
        "eviction": cfg.eviction,
        "signing_key": cfg.signing_key,
        "accepted_keys": list(cfg.accepted_keys),
    }


def open_store(cfg: Settings) -> _core.LocalStore:
    """`_core.LocalStore.open(cfg.cache_dir, **store_options(cfg))`. Raises CacheError."""
    return _core.LocalStore.open(cfg.cache_dir, **store_options(cfg))


def _remote_from_environment(urls: str | None) -> RemoteSettings | None:
    """The remote settings of the environment; `urls` (from configure) replaces AOTCACHE_REMOTE when not None."""
    urls = (os.environ.get("AOTCACHE_REMOTE", "") if urls is None else urls).strip()
    if not urls:
        return None
    d = RemoteSettings(urls=urls)
    env = _env_or_default
    return RemoteSettings(
        urls=urls,
        readonly=_env_bool("AOTCACHE_REMOTE_READONLY", False),
        key_prefix=os.environ.get("AOTCACHE_REMOTE_PREFIX", d.key_prefix) or d.key_prefix,
        ttl_seconds=env("AOTCACHE_REMOTE_TTL", lambda t: int(parse_seconds(t)), 0, "remote_config"),
        connect_timeout_ms=env("AOTCACHE_REMOTE_CONNECT_TIMEOUT_MS", int, d.connect_timeout_ms, "remote_config"),
        operation_timeout_ms=env("AOTCACHE_REMOTE_TIMEOUT_MS", int, d.operation_timeout_ms, "remote_config"),
        max_entry_bytes=env("AOTCACHE_REMOTE_MAX_ENTRY_SIZE", _core.parse_size, d.max_entry_bytes, "remote_config"),
        down_seconds=env("AOTCACHE_REMOTE_DOWN_SECONDS", int, d.down_seconds, "remote_config"),
        lease_seconds=env("AOTCACHE_REMOTE_LEASE", parse_seconds, d.lease_seconds, "remote_config"),
    )


def _from_environment(remote_urls: str | None = None) -> Settings:
    signing_key, accepted_keys = _signing_from_environment()
    env = os.environ
    return Settings(
        cache_dir=_core.default_cache_dir(
            env.get("AOTCACHE_DIR", ""), env.get("XDG_CACHE_HOME", ""), env.get("HOME", "")
        ),
        enabled=not _env_bool("AOTCACHE_DISABLE", False),
        salt=os.environ.get("AOTCACHE_SALT", ""),
        max_size=_env_or_default("AOTCACHE_MAX_SIZE", _core.parse_size, _core.DEFAULT_MAX_SIZE, "max_size_config"),
        compile_wait_seconds=_env_or_default(
            "AOTCACHE_COMPILE_WAIT", parse_seconds, DEFAULT_COMPILE_WAIT_SECONDS, "compile_wait_config"
        ),
        remote=_remote_from_environment(remote_urls),
        kernels=_env_bool("AOTCACHE_KERNELS", True),
        frames=_env_bool("AOTCACHE_FRAMES", True),
        verify_frames=_env_bool("AOTCACHE_FRAMES_VERIFY", False),
        isa_probe_memo=_env_bool("AOTCACHE_ISA_PROBE_MEMO", True),
        light_load=_env_bool("AOTCACHE_LIGHT_LOAD", True),
        eviction=_env_or_default("AOTCACHE_EVICTION", _eviction, DEFAULT_EVICTION, "eviction_config"),
        signing_key=signing_key,
        accepted_keys=accepted_keys,
    )


def current() -> Settings:
    """The settings in force: the environment, read at each compile, with `configure()` overrides on top."""
    with _lock:
        s = dataclasses.replace(_from_environment(_remote_urls[0] if _remote_urls else None), **_overrides)
        if s.remote is not None and _remote_overrides:
            s = dataclasses.replace(s, remote=dataclasses.replace(s.remote, **_remote_overrides))
        return s


_REMOTE_FIELDS = {
    "remote_readonly": "readonly",
    "remote_prefix": "key_prefix",
    "remote_ttl": "ttl_seconds",
    "remote_connect_timeout_ms": "connect_timeout_ms",
    "remote_timeout_ms": "operation_timeout_ms",
    "remote_max_entry_size": "max_entry_bytes",
    "remote_down_seconds": "down_seconds",
    "remote_lease": "lease_seconds",
}


def configure(
    *,
    cache_dir: str | None = None,
    enabled: bool | None = None,
    salt: str | None = None,
    max_size: int | str | None = None,
    compile_wait: float | str | None = None,
    remote: str | None = None,
    remote_readonly: bool | None = None,
    remote_prefix: str | None = None,
    remote_ttl: float | str | None = None,
    remote_connect_timeout_ms: int | None = None,
    remote_timeout_ms: int | None = None,
    remote_max_entry_size: int | str | None = None,
    remote_down_seconds: int | None = None,
    remote_lease: float | str | None = None,
    isa_probe_memo: bool | None = None,
    kernels: bool | None = None,
    eviction: str | None = None,
    frames: bool | None = None,
    light_load: bool | None = None,
    verify_frames: bool | None = None,
) -> Settings:
    """Overrides settings for this process; `None` leaves a setting as it is. `remote=""` turns the remote tier off;
    the other remote_* options apply whether the URLs come from `remote=` or from AOTCACHE_REMOTE. Durations take
    seconds or '10m'-style text, sizes bytes or '500M'-style text. Raises ValueError (or CacheError for a size) for
    a malformed value, changing nothing. `eviction` is `lru` or `saved-per-byte`. Returns the settings in force."""
    if isinstance(max_size, str):
        max_size = _core.parse_size(max_size)
    if max_size is not None and (
        isinstance(max_size, bool) or not isinstance(max_size, int) or not 0 <= max_size < 1 << 64
    ):
        raise ValueError(f"max_size must be a size in bytes >= 0 (0 = unbounded), got {max_size!r}")
    if eviction is not None:
        _eviction(eviction)
    if isinstance(compile_wait, str):
        compile_wait = parse_seconds(compile_wait)
    if compile_wait is not None and not compile_wait >= 0:
        raise ValueError(f"compile_wait must be >= 0, got {compile_wait!r}")
    if isinstance(remote_ttl, str):
        remote_ttl = parse_seconds(remote_ttl)
    if isinstance(remote_lease, str):
        remote_lease = parse_seconds(remote_lease)
    if remote_lease is not None and not remote_lease > 0:
        raise ValueError(f"remote_lease must be > 0, got {remote_lease!r}")
    if isinstance(remote_max_entry_size, str):
        remote_max_entry_size = _core.parse_size(remote_max_entry_size)
    if remote:  # validated now, so a typo fails here and not silently at the first compile
        for url in remote.split(","):
            _core.RemoteStore.open(url.strip())
    values = {
        "remote_readonly": remote_readonly,
        "remote_prefix": remote_prefix,
        "remote_ttl": None if remote_ttl is None else int(remote_ttl),
        "remote_connect_timeout_ms": remote_connect_timeout_ms,
        "remote_timeout_ms": remote_timeout_ms,
        "remote_max_entry_size": remote_max_entry_size,
        "remote_down_seconds": remote_down_seconds,
        "remote_lease": remote_lease,
    }
    with _lock:
        for name, value in (
            ("cache_dir", cache_dir),
            ("enabled", enabled),
            ("salt", salt),
            ("max_size", max_size),
            ("compile_wait_seconds", compile_wait),
            ("isa_probe_memo", isa_probe_memo),
            ("kernels", kernels),
            ("eviction", eviction),
            ("frames", frames),
            ("light_load", light_load),
            ("verify_frames", verify_frames),
        ):
            if value is not None:
                _overrides[name] = os.path.abspath(os.path.expanduser(value)) if name == "cache_dir" else value
        for name, value in values.items():
            if value is not None:
                _remote_overrides[_REMOTE_FIELDS[name]] = value
        if remote is not None:
            _remote_urls[:] = [remote]
    settings = current()
    for listener in list(_listeners):
        listener(settings)
    return settings


_listeners: list[Any] = []


def on_configure(listener: Any) -> None:
    """Calls `listener(settings)` after every `configure()` from now on (aotcache.activation: frames switched on
    after the first compile install the frame cache's hooks then). Settings import nothing above them."""
    if listener not in _listeners:
        _listeners.append(listener)


def reset() -> None:
    """Drops every `configure()` override."""
    with _lock:
        _overrides.clear()
        _remote_overrides.clear()
        _remote_urls.clear()
