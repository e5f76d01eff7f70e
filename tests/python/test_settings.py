"""Settings: environment variables, `aotcache.configure()` overrides (remote tier and compile-once included),
validation, and what the remote tier opens from them. In-process, no compile."""

from __future__ import annotations

import logging

import pytest

import aotcache
from aotcache import _core, remote, settings


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
