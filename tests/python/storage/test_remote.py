"""The remote tier against real redis-server processes: two cache directories sharing one Redis behave as two
machines; faults (dead, slow server) never fail a compile; forged entries are refused with a signing key; read-only
mode, TTL, and two shards. Skipped only when redis-server is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from aotcache import _core
from conftest import assert_bitwise_equal, cli, frames_on, graph_keys

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

KEY_A = "a:0123456789abcdef-cluster-secret-a"
KEY_X = "x:0123456789abcdef-attacker-secret"


def _env(tmp_path: Path, machine: str, url: str, **extra: str) -> dict[str, str]:
    env = {"AOTCACHE_DIR": str(tmp_path / machine), "AOTCACHE_REMOTE": url}
    env.update(extra)
    return env


def _per_compile() -> int:
    """Entries one compile of the mlp workload writes, reads or looks up: its graph entry, and with the frame cache on
    its frame entry (the frame is looked up first; both travel through the remote tier)."""
    return 2 if frames_on() else 1


def _keys(cache_dir: Path) -> list[str]:
    """The graph entries' keys (with frames on, a compiled frame adds a frame entry)."""
    return graph_keys(cache_dir)


def test_two_machines_share_one_redis(run_fresh, tmp_path, redis):
    a = run_fresh("mlp", env=_env(tmp_path, "a", redis.url))
    assert (a.stats["hits"], a.stats["misses"]) == (0, 1)
    n = _per_compile()
    assert a.stats["remote"]["misses"] == n and a.stats["remote"]["puts"] == n, a.stats["remote"]
    [key] = _keys(tmp_path / "a")
    assert redis.store().get(key) == (tmp_path / "a" / "entries" / key[:2] / f"{key}.aotc").read_bytes()

    b = run_fresh("mlp", env=_env(tmp_path, "b", redis.url))  # an empty local directory: a remote hit
    assert (b.stats["hits"], b.stats["misses"]) == (1, 0)
    assert b.stats["remote"]["hits"] == n and "errors" not in b.stats["remote"]
    assert b.aot_autograd.get("autograd_cache_miss", 0) == 0
    assert_bitwise_equal(a.tensors, b.tensors)
    assert _keys(tmp_path / "b") == [key]  # backfilled

    redis.kill()  # the backfilled entry is now a local hit, with the remote dead
    c = run_fresh("mlp", env=_env(tmp_path, "b", redis.url))
    assert (c.stats["hits"], c.stats["misses"]) == (1, 0) and c.stats["remote"] == {}
    assert "remote.hits" in cli(tmp_path / "b", "stats")


def test_forged_entries_are_rejected_with_a_signing_key(run_fresh, tmp_path, redis):
    # An attacker who can write to Redis but lacks the key: an unsigned entry (valid checksum), then one signed
    # with another key, both stored under the key the victim will look up.
    unsigned = run_fresh("mlp", env={"AOTCACHE_DIR": str(tmp_path / "attacker")})
    [key] = _keys(tmp_path / "attacker")
    entry_file = tmp_path / "attacker" / "entries" / key[:2] / f"{key}.aotc"
    forged_unsigned = entry_file.read_bytes()
    entry_file.unlink()
    run_fresh("mlp", env={"AOTCACHE_DIR": str(tmp_path / "attacker"), "AOTCACHE_SIGNING_KEY": KEY_X})
    forged_wrong_key = entry_file.read_bytes()
    assert forged_wrong_key != forged_unsigned

    for i, forged in enumerate((forged_unsigned, forged_wrong_key)):
        redis.store().put(key, forged)
        victim = run_fresh("mlp", env=_env(tmp_path, "victim", redis.url, AOTCACHE_SIGNING_KEY=KEY_A))
        assert (victim.stats["hits"], victim.stats["misses"]) == (0, 1)
        # With frames on, the second victim finds the first one's (signed) frame entry, which names this graph key:
        # the forged graph is fetched and rejected for the frame, then again by the trace that follows.
        assert victim.stats["remote"]["rejected_signature"] == (2 if frames_on() and i == 1 else 1)
        assert victim.stats["remote"].get("hits", 0) == (1 if frames_on() and i == 1 else 0)  # that frame entry
        assert any("rejected" in line for line in victim.stdout.splitlines())
        assert_bitwise_equal(unsigned.tensors, victim.tensors)
        # The victim's own compile replaced the forged entry with one signed by the cluster key.
        assert redis.store().get(key) not in (forged, None)
        shutil.rmtree(tmp_path / "victim")

    signed = run_fresh("mlp", env=_env(tmp_path, "peer", redis.url, AOTCACHE_SIGNING_KEY=KEY_A))
    assert signed.stats["remote"]["hits"] == _per_compile() and signed.stats["hits"] == 1


def test_dead_redis_never_fails_a_compile(run_fresh, tmp_path, redis):
    # Exact counts of the remote operations of one graph's compile, so frames off (with them on, the frame's lookup
    # comes first and is the one that finds the server down).
    run_fresh("mlp", env=_env(tmp_path, "a", redis.url, AOTCACHE_FRAMES="0"))
    redis.kill()
    t0 = time.monotonic()
    b = run_fresh("mlp", env=_env(tmp_path, "b", redis.url, AOTCACHE_FRAMES="0"))
    assert (b.stats["hits"], b.stats["misses"], b.stats["errors"]) == (0, 1, 0)
    assert b.stats["remote"]["errors"] == 3  # the lookup, the compile lease, then the put
    assert b.stats["remote"]["skipped_down"] == 2  # lease and put did not even try: the server was marked down
    assert b.stats["remote"]["server_errors"] == 1
    warnings = [ln for ln in b.log if "WARNING" in ln and "remote" in ln]
    assert len(warnings) == 3, warnings  # one per kind (get, lease, put), not per occurrence
    assert time.monotonic() - t0 < 120
    assert _keys(tmp_path / "b")  # stored locally all the same


def test_slow_redis_delays_by_at_most_the_timeout(run_fresh, tmp_path, redis):
    # Exact counts of one graph's remote operations, so frames off (see test_dead_redis_never_fails_a_compile).
    run_fresh("mlp", env=_env(tmp_path, "a", redis.url, AOTCACHE_FRAMES="0"))
    sleeper = subprocess.Popen(["redis-cli", "-p", str(redis.port), "DEBUG", "SLEEP", "60"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        b = run_fresh("mlp", env=_env(tmp_path, "b", redis.url, AOTCACHE_REMOTE_TIMEOUT_MS="300", AOTCACHE_FRAMES="0"))
    finally:
        redis.kill()
        sleeper.kill()
        sleeper.wait()
    assert (b.stats["hits"], b.stats["misses"]) == (0, 1)
    # Lookup timed out (server marked down), then the lease and the put were skipped at once.
    assert b.stats["remote"]["timeouts"] == 1 and b.stats["remote"]["errors"] == 3
    assert 0.25 <= b.stats["remote"]["get_us"] / 1e6 < 1.0  # the lookup waited the timeout, no longer


def test_readonly_reads_but_never_writes(run_fresh, tmp_path, redis):
    a = run_fresh("mlp", env=_env(tmp_path, "a", redis.url, AOTCACHE_REMOTE_READONLY="1"))
    assert a.stats["misses"] == 1 and a.stats["remote"]["misses"] == _per_compile() and "puts" not in a.stats["remote"]
    assert redis.cli("DBSIZE") == "0"
    [key] = _keys(tmp_path / "a")
    redis.store().put(key, (tmp_path / "a" / "entries" / key[:2] / f"{key}.aotc").read_bytes())
    b = run_fresh("mlp", env=_env(tmp_path, "b", redis.url, AOTCACHE_REMOTE_READONLY="1"))
    assert b.stats["hits"] == 1 and b.stats["remote"]["hits"] == 1  # the graph entry (the frame entry is not there)


def test_ttl_expires_remote_entries(run_fresh, tmp_path, redis):
    run_fresh("mlp", env=_env(tmp_path, "a", redis.url, AOTCACHE_REMOTE_TTL="5s", AOTCACHE_REMOTE_PREFIX="ns1:"))
    [key] = _keys(tmp_path / "a")
    assert redis.store().get(key) is None  # another namespace
    store = redis.store(key_prefix="ns1:")
    assert store.get(key) is not None
    left_ms = int(redis.cli("PTTL", f"ns1:{key}"))
    assert 0 < left_ms <= 5000
    time.sleep(left_ms / 1e3 + 0.3)
    assert store.get(key) is None


def test_two_shards_are_both_used(run_fresh, tmp_path, redis_factory):
    one, two = redis_factory(), redis_factory()
    both = _core.RemoteStore.open(f"{one.url},{two.url}")
    keys = [f"{n:064x}" for n in range(40)]
    for k in keys:
        both.put(k, k.encode())
    on_one = [k for k in keys if one.store().get(k) is not None]
    on_two = [k for k in keys if two.store().get(k) is not None]
    assert sorted(on_one + on_two) == keys and 8 <= len(on_one) <= 32
    assert all(both.get(k) == k.encode() for k in keys)

    a = run_fresh("mlp", env=_env(tmp_path, "a", f"{one.url},{two.url}"))
    b = run_fresh("mlp", env=_env(tmp_path, "b", f"{two.url}, {one.url}"))  # order does not matter
    n = _per_compile()
    assert a.stats["remote"]["puts"] == n and b.stats["remote"]["hits"] == n


def test_oversized_entries_are_refused_and_counted(run_fresh, tmp_path, redis):
    a = run_fresh("mlp", env=_env(tmp_path, "a", redis.url, AOTCACHE_REMOTE_MAX_ENTRY_SIZE="1K"))
    assert a.stats["misses"] == 1 and a.stats["remote"]["too_large"] == _per_compile()
    assert "puts" not in a.stats["remote"]
    assert redis.cli("DBSIZE") == "0"


def test_frame_entries_are_shared_and_signed(run_fresh, tmp_path, redis):
    """Frame entries travel through the remote tier like graph entries: machine b, with an empty directory, runs
    the frame without Dynamo tracing it; a machine whose accepted key did not sign them traces and compiles."""
    env = {"AOTCACHE_FRAMES": "1", "AOTCACHE_SIGNING_KEY": KEY_A}
    a = run_fresh("mlp", env=_env(tmp_path, "a", redis.url, **env))
    assert a.stats["frames"].get("recorded", 0) >= 1, a.stats["frames"]
    b = run_fresh("mlp", env=_env(tmp_path, "b", redis.url, **env))
    assert b.stats["frames"].get("hits", 0) >= 1 and not b.stats["frames"].get("misses"), b.stats["frames"]
    assert (b.stats["hits"], b.stats["misses"]) == (1, 0)
    assert_bitwise_equal(a.tensors, b.tensors)
    kinds = {e["kind"] for e in json.loads(cli(tmp_path / "b", "ls", "--json"))}
    assert kinds == {"frame", "graph"}, kinds
    x = run_fresh("mlp", env=_env(tmp_path, "x", redis.url, AOTCACHE_FRAMES="1", AOTCACHE_SIGNING_KEY=KEY_X))
    assert not x.stats["frames"].get("hits") and x.stats["hits"] == 0 and x.stats["misses"] == 1, x.stats
    assert_bitwise_equal(a.tensors, x.tensors)
