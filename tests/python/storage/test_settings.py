"""Settings: environment variables, `aotcache.configure()` overrides (remote tier and compile-once included),
validation, and what the remote tier opens from them. In-process, no compile."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys

import pytest

import aotcache
from aotcache import _core, settings
from aotcache.storage import remote


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in [
        "AOTCACHE_REMOTE",
        "AOTCACHE_REMOTE_TTL",
        "AOTCACHE_REMOTE_READONLY",
        "AOTCACHE_COMPILE_WAIT",
        "AOTCACHE_REMOTE_LEASE",
        "AOTCACHE_MAX_SIZE",
        "AOTCACHE_ISA_PROBE_MEMO",
        "AOTCACHE_DISABLE",
        "AOTCACHE_KERNELS",
        "AOTCACHE_FRAMES",
        "AOTCACHE_EVICTION",
        "AOTCACHE_SIGNING_KEY",
        "AOTCACHE_SIGNING_KEYS_ACCEPTED",
    ]:
        monkeypatch.delenv(name, raising=False)
    settings.reset()
    remote.reset()
    yield
    settings.reset()
    remote.reset()


def test_defaults_without_environment():
    s = aotcache.current_settings()
    assert s.remote is None
    assert s.compile_wait_seconds == settings.DEFAULT_COMPILE_WAIT_SECONDS


@pytest.mark.parametrize(("value", "expected"), [(None, True), ("0", False), ("off", False), ("1", True), ("", True)])
def test_isa_probe_memo_switch(monkeypatch, value, expected):
    if value is not None:
        monkeypatch.setenv("AOTCACHE_ISA_PROBE_MEMO", value)
    assert aotcache.current_settings().isa_probe_memo is expected
    assert aotcache.configure(isa_probe_memo=not expected).isa_probe_memo is (not expected)


def test_environment_sets_the_remote_tier_and_the_wait(monkeypatch):
    monkeypatch.setenv("AOTCACHE_REMOTE", "redis://h1:7000/2, redis://h2")
    monkeypatch.setenv("AOTCACHE_REMOTE_TTL", "30m")
    monkeypatch.setenv("AOTCACHE_REMOTE_READONLY", "yes")
    monkeypatch.setenv("AOTCACHE_REMOTE_LEASE", "1m")
    monkeypatch.setenv("AOTCACHE_COMPILE_WAIT", "90s")
    s = aotcache.current_settings()
    assert (s.remote.ttl_seconds, s.remote.readonly, s.remote.lease_seconds) == (1800, True, 60.0)
    assert s.compile_wait_seconds == 90.0
    store, cfg = remote.current(s.remote)
    assert cfg == s.remote and store.servers == ["redis://h1:7000/2", "redis://h2:6379/0"]


def test_configure_overrides_the_environment_and_keeps_its_other_remote_options(monkeypatch):
    monkeypatch.setenv("AOTCACHE_REMOTE", "redis://from-env")
    monkeypatch.setenv("AOTCACHE_REMOTE_TTL", "1h")
    s = aotcache.configure(remote="redis://from-python:1/0", compile_wait="2m", remote_prefix="team:")
    assert s.remote.urls == "redis://from-python:1/0"
    assert s.remote.ttl_seconds == 3600  # from the environment: configure(remote=) replaces only the URLs
    assert s.remote.key_prefix == "team:" and s.compile_wait_seconds == 120.0
    assert aotcache.configure(remote="").remote is None  # off, although AOTCACHE_REMOTE is set
    settings.reset()
    assert aotcache.current_settings().remote.urls == "redis://from-env"


def test_remote_options_apply_to_urls_from_the_environment(monkeypatch):
    monkeypatch.setenv("AOTCACHE_REMOTE", "redis://h")
    s = aotcache.configure(remote_readonly=True, remote_ttl=60, remote_max_entry_size="1M", remote_lease=5)
    assert (s.remote.readonly, s.remote.ttl_seconds, s.remote.max_entry_bytes, s.remote.lease_seconds) == (
        True,
        60,
        1 << 20,
        5,
    )


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"remote": "http://not-redis"}, _core.CacheError),
        ({"remote": "redis://h:99999"}, _core.CacheError),
        ({"compile_wait": -1}, ValueError),
        ({"compile_wait": "soon"}, ValueError),
        ({"remote_lease": 0}, ValueError),
        ({"max_size": "lots"}, _core.CacheError),
    ],
)
def test_malformed_values_raise_and_change_nothing(kwargs, error):
    before = aotcache.current_settings()
    with pytest.raises(error):
        aotcache.configure(**kwargs)
    assert aotcache.current_settings() == before


def test_malformed_environment_is_reported_once_and_the_default_used(monkeypatch, caplog):
    monkeypatch.setenv("AOTCACHE_COMPILE_WAIT", "forever")
    from aotcache import counters

    counters.reset()
    with caplog.at_level(logging.DEBUG, logger="aotcache"):
        assert aotcache.current_settings().compile_wait_seconds == settings.DEFAULT_COMPILE_WAIT_SECONDS
        aotcache.current_settings()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "AOTCACHE_COMPILE_WAIT" in r.message]
    assert len(warnings) == 1


def test_parse_seconds():
    assert [settings.parse_seconds(t) for t in ("90", "1.5", "30s", "10m", "2h", "1d", "1w")] == [
        90,
        1.5,
        30,
        600,
        7200,
        86400,
        604800,
    ]
    for bad in ("", "-1", "1y", "nan", "inf"):
        with pytest.raises(ValueError):
            settings.parse_seconds(bad)


KEY_A = "a:0123456789abcdef-secret-a"
KEY_B = "b:0123456789abcdef-secret-b"
KEY_C = "c:0123456789abcdef-secret-c"


def test_store_options_default_to_the_documented_defaults(tmp_path):
    s = aotcache.current_settings()
    assert (s.eviction, s.signing_key, s.accepted_keys) == ("lru", None, ())
    assert settings.store_options(s) == {
        "max_size": _core.DEFAULT_MAX_SIZE,
        "eviction": "lru",
        "signing_key": None,
        "accepted_keys": [],
    }
    store = settings.open_store(dataclasses.replace(s, cache_dir=str(tmp_path)))
    assert (store.max_size, store.eviction, store.signing_key_ids) == (_core.DEFAULT_MAX_SIZE, "lru", [])
    plain = _core.LocalStore.open(str(tmp_path))  # the binding's defaults are the same
    assert (plain.max_size, plain.eviction, plain.signing_key_ids) == (_core.DEFAULT_MAX_SIZE, "lru", [])


def test_environment_sets_the_store_options(monkeypatch, tmp_path):
    monkeypatch.setenv("AOTCACHE_MAX_SIZE", "5")
    monkeypatch.setenv("AOTCACHE_EVICTION", "saved-per-byte")
    monkeypatch.setenv("AOTCACHE_SIGNING_KEY", KEY_B)
    monkeypatch.setenv("AOTCACHE_SIGNING_KEYS_ACCEPTED", f"{KEY_A},{KEY_C}")
    s = aotcache.current_settings()
    assert (s.max_size, s.eviction, s.signing_key, s.accepted_keys) == (5, "saved-per-byte", KEY_B, (KEY_A, KEY_C))
    store = _core.LocalStore.open(str(tmp_path), **settings.store_options(s))
    assert (store.max_size, store.eviction, store.signing_key_ids) == (5, "saved-per-byte", ["b", "a", "c"])
    # Secrets never show in the settings' repr (configure() returns them, users print them).
    assert "secret" not in repr(s) and "secret" not in str(aotcache.configure())


def test_the_older_key_list_spelling_signs_with_its_first_key(monkeypatch):
    monkeypatch.setenv("AOTCACHE_SIGNING_KEY", f"{KEY_B},{KEY_A}")
    monkeypatch.setenv("AOTCACHE_SIGNING_KEYS_ACCEPTED", KEY_C)
    s = aotcache.current_settings()
    assert (s.signing_key, s.accepted_keys) == (KEY_B, (KEY_A, KEY_C))


@pytest.mark.parametrize(
    "env",
    [
        {"AOTCACHE_SIGNING_KEY": "a:short"},
        {"AOTCACHE_SIGNING_KEY": f"{KEY_A},"},
        {"AOTCACHE_SIGNING_KEY": KEY_A, "AOTCACHE_SIGNING_KEYS_ACCEPTED": "b:short"},
        {"AOTCACHE_SIGNING_KEY": KEY_A, "AOTCACHE_SIGNING_KEYS_ACCEPTED": "a:0123456789abcdef-other-secret"},
        {"AOTCACHE_SIGNING_KEYS_ACCEPTED": KEY_A},  # verify-only: its own entries would be refused
    ],
)
def test_unusable_signing_keys_fail_closed(monkeypatch, caplog, tmp_path, env):
    # Ignoring a malformed key would silently turn signing (and verification) off: the values are kept, warned
    # about once, and no store opens with them, so the cache is not used at all.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from aotcache import counters

    counters.reset()
    with caplog.at_level(logging.DEBUG, logger="aotcache"):
        s = aotcache.current_settings()
        aotcache.current_settings()
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "AOTCACHE_SIGNING_KEY" in warnings[0], warnings
    assert s.signing_key is not None or s.accepted_keys
    with pytest.raises(_core.CacheError) as raised:
        settings.open_store(dataclasses.replace(s, cache_dir=str(tmp_path)))
    assert "0123456789abcdef" not in str(raised.value) + warnings[0]  # no secret in any message


def test_malformed_eviction_is_reported_once_and_the_default_used(monkeypatch, caplog):
    monkeypatch.setenv("AOTCACHE_EVICTION", "random")
    from aotcache import counters

    counters.reset()
    with caplog.at_level(logging.DEBUG, logger="aotcache"):
        assert aotcache.current_settings().eviction == "lru"
        aotcache.current_settings()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "AOTCACHE_EVICTION" in r.message]
    assert len(warnings) == 1


def test_configure_eviction_and_tiny_bounds():
    assert aotcache.configure(eviction="saved-per-byte").eviction == "saved-per-byte"
    assert aotcache.configure(max_size=5).max_size == 5  # enforced by the store, however small
    assert aotcache.configure(max_size="0.5").max_size == 1  # rounded up: never 0 ("unbounded")
    before = aotcache.current_settings()
    for bad in ({"eviction": "random"}, {"max_size": -1}, {"max_size": 1.5}, {"max_size": True}):
        with pytest.raises(ValueError):
            aotcache.configure(**bad)
    assert aotcache.current_settings() == before


def test_default_cache_dir_is_computed_from_the_environment(monkeypatch):
    assert _core.default_cache_dir("/a", "/x", "/h") == "/a"
    assert _core.default_cache_dir("", "/x", "/h") == "/x/aotcache"
    assert _core.default_cache_dir("", "", "/h") == "/h/.cache/aotcache"
    assert _core.default_cache_dir("", "", "") == "/tmp/.cache/aotcache"
    monkeypatch.delenv("AOTCACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert aotcache.current_settings().cache_dir == "/somewhere/aotcache"


@pytest.mark.parametrize(
    ("name", "field", "default"),
    [
        ("AOTCACHE_DISABLE", "enabled", True),
        ("AOTCACHE_KERNELS", "kernels", True),
        ("AOTCACHE_ISA_PROBE_MEMO", "isa_probe_memo", True),
        ("AOTCACHE_FRAMES", "frames", True),
    ],
)
def test_malformed_booleans_are_reported_once_and_the_default_used(monkeypatch, caplog, name, field, default):
    # Before: AOTCACHE_DISABLE=perhaps or AOTCACHE_KERNELS=maybe were silently read as one value or the other.
    aotcache.reset_stats()
    monkeypatch.setenv(name, "perhaps")
    with caplog.at_level(logging.DEBUG, logger="aotcache"):
        first, second = aotcache.current_settings(), aotcache.current_settings()
    assert getattr(first, field) == getattr(second, field) == default
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING and name in r.message]
    assert len(warnings) == 1 and "perhaps" in warnings[0], warnings
    for spelling, value in (("YES", True), ("off", False), ("1", True), ("false", False)):
        monkeypatch.setenv(name, spelling)
        assert settings._env_bool(name, not value) == value


def test_readonly_remote_flag_is_validated_too(monkeypatch, caplog):
    aotcache.reset_stats()
    monkeypatch.setenv("AOTCACHE_REMOTE", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("AOTCACHE_REMOTE_READONLY", "sometimes")
    with caplog.at_level(logging.WARNING, logger="aotcache"):
        assert aotcache.current_settings().remote.readonly is False
    assert any("AOTCACHE_REMOTE_READONLY" in r.message for r in caplog.records)


def test_frames_are_on_by_default_and_configure_installs_the_hooks(monkeypatch):
    monkeypatch.delenv("AOTCACHE_FRAMES", raising=False)
    assert aotcache.current_settings().frames is True
    monkeypatch.setenv("AOTCACHE_FRAMES", "0")
    assert aotcache.current_settings().frames is False
    assert aotcache.configure(frames=False).frames is False
    monkeypatch.delenv("AOTCACHE_FRAMES")
    assert aotcache.configure(frames=True).frames is True
    # In a fresh process: the backend's lookup activates aotcache (frames off: no hooks); a later configure(frames=
    # True) installs them (settings tell aotcache.activation, which they do not import).
    program = (
        "import aotcache, torch._dynamo.convert_frame as cf\n"
        "from aotcache.frames import hooks\n"
        "aotcache.aotcache_backend\n"
        "before = (hooks._installed, cf._compile.__module__)\n"
        "aotcache.configure(frames=True)\n"
        "print('RESULT', before, (hooks._installed, cf._compile.__module__))\n"
    )
    env = {**os.environ, "AOTCACHE_FRAMES": "0"}
    env.pop("AOTCACHE_FRAMES_GUARD_LOG", None)
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT"))
    assert line == "RESULT (False, 'torch._dynamo.convert_frame') (True, 'aotcache.frames.hooks')", line
