"""Compile once (single_flight.py), with real processes: 8 processes that miss the same key at once compile it once
and the other 7 load it, on one cache directory (file lock) and on 8 directories sharing a real redis-server (lease);
a holder that dies frees the waiters; a holder that never finishes costs at most AOTCACHE_COMPILE_WAIT; symbolic
graphs go through the remote tier too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HERE, assert_bitwise_equal, cli, frames_on, graph_keys

pytestmark = pytest.mark.timeout(1800)
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

PROCESSES = 8


def _keys(cache_dir: Path) -> list[str]:
    """The graph entries' keys (with frames on, a compiled frame adds a frame entry)."""
    return graph_keys(cache_dir)


def _totals(results, name: str) -> int:
    """Sum over processes of a counter: "hits", or "wait.waited" for r.stats["wait"]["waited"]."""
    group, _, key = name.rpartition(".")
    return sum((r.stats[group] if group else r.stats).get(key, 0) for r in results)


def _start_together(spawn_fresh, tmp_path: Path, envs: list[dict]) -> list:
    barrier = tmp_path / f"barrier{time.monotonic_ns()}"
    t0 = time.monotonic()
    procs = [spawn_fresh("mlp", "--barrier", f"{barrier}:{len(envs)}", env=env) for env in envs]
    results = [p.result() for p in procs]
    # Shown with `pytest -s`: the figures of docs/guide/remote-tier.md, "Compile once".
    print(f"\n{len(envs)} processes, {time.monotonic() - t0:.1f}s wall:")
    for i, r in enumerate(results):
        w = r.stats["wait"]
        print(
            f"  process {i}: misses {r.stats['misses']} hits {r.stats['hits']} remote.hits "
            f"{r.stats['remote'].get('hits', 0)} waited {w.get('waited', 0)} ({w['seconds']:.2f}s) "
            f"compile {r.stats['compile_seconds']:.2f}s"
        )
    return results


def test_eight_processes_on_one_directory_compile_once(spawn_fresh, tmp_path, cache_dir):
    results = _start_together(spawn_fresh, tmp_path, [{}] * PROCESSES)
    assert (_totals(results, "misses"), _totals(results, "hits")) == (1, PROCESSES - 1)
    assert _totals(results, "errors") == 0
    # The others waited for the compile rather than finding the entry already there (they started together).
    assert _totals(results, "wait.waited") >= 1 and _totals(results, "wait.hits") == _totals(results, "wait.waited")
    assert _totals(results, "wait.timeouts") == 0
    for r in results[1:]:
        assert_bitwise_equal(results[0].tensors, r.tensors)
    assert len(_keys(cache_dir)) == 1
    assert not list((cache_dir / "locks").iterdir())  # released locks leave no file
    stats = cli(cache_dir, "stats")
    assert re.search(r"^misses\s+1$", stats, re.M) and re.search(rf"^hits\s+{PROCESSES - 1}$", stats, re.M), stats

    # Control: without single-flight the same start compiles more than once (so the test above can fail).
    shutil.rmtree(cache_dir)
    control = _start_together(spawn_fresh, tmp_path, [{"AOTCACHE_COMPILE_WAIT": "0"}] * PROCESSES)
    assert _totals(control, "misses") >= 2 and _totals(control, "wait.waited") == 0


@needs_redis
def test_eight_machines_sharing_redis_compile_once(spawn_fresh, tmp_path, redis):
    envs = [{"AOTCACHE_DIR": str(tmp_path / f"m{i}"), "AOTCACHE_REMOTE": redis.url} for i in range(PROCESSES)]
    results = _start_together(spawn_fresh, tmp_path, envs)
    assert (_totals(results, "misses"), _totals(results, "hits")) == (1, PROCESSES - 1)
    remote_hits = sum(r.stats["remote"].get("hits", 0) for r in results)
    if frames_on():  # and the frame entry, for the processes that looked it up after the first one recorded it
        assert PROCESSES - 1 <= remote_hits <= 2 * (PROCESSES - 1), remote_hits
    else:
        assert remote_hits == PROCESSES - 1
    assert sum(r.stats["remote"].get("lease_waits", 0) for r in results) >= 1
    assert sum(r.stats["remote"].get("errors", 0) for r in results) == 0
    for r in results[1:]:
        assert_bitwise_equal(results[0].tensors, r.tensors)
    assert not [k for k in redis.cli("KEYS", "*").split() if ":lease:" in k]  # released


def _learn_key(run_fresh, tmp_path: Path) -> str:
    """The mlp workload's key, from a throwaway directory."""
    learn = tmp_path / "learn"
    run_fresh("mlp", env={"AOTCACHE_DIR": str(learn)})
    [key] = _keys(learn)
    return key


def _hold(*args: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, str(HERE / "lock_holder.py"), *args], stdout=subprocess.PIPE, text=True)
    with holder.stdout:
        assert holder.stdout.readline().strip() == "HELD"
    return holder


def test_a_dead_holder_frees_the_waiter(run_fresh, spawn_fresh, tmp_path, cache_dir):
    key = _learn_key(run_fresh, tmp_path)
    holder = _hold("local", str(cache_dir), key)
    try:
        waiter = spawn_fresh("mlp")
        waiter.wait_for_output("being compiled by another process")
        time.sleep(1)
        holder.kill()  # SIGKILL mid-"compile": the kernel drops its lock
        t_killed = time.monotonic()
        r = waiter.result()
    finally:
        holder.kill()
        holder.wait()
    assert (r.stats["misses"], r.stats["wait"]["waited"]) == (1, 1)
    assert "timeouts" not in r.stats["wait"] and "hits" not in r.stats["wait"]
    assert time.monotonic() - t_killed < 120  # it compiled right away, it did not sit out AOTCACHE_COMPILE_WAIT
    assert _keys(cache_dir) == [key]


def test_a_stuck_holder_costs_at_most_the_wait_bound(run_fresh, tmp_path, cache_dir):
    key = _learn_key(run_fresh, tmp_path)
    holder = _hold("local", str(cache_dir), key)
    try:
        r = run_fresh("mlp", env={"AOTCACHE_COMPILE_WAIT": "3"})
    finally:
        holder.kill()
        holder.wait()
    assert (r.stats["misses"], r.stats["wait"]["waited"], r.stats["wait"]["timeouts"]) == (1, 1, 1)
    assert 3.0 <= r.stats["wait"]["seconds"] < 6.0
    assert any("gave up waiting" in ln for ln in r.log)
    assert _keys(cache_dir) == [key]  # compiled and stored despite the stuck holder


@needs_redis
def test_a_dead_machine_frees_the_lease_when_it_expires(run_fresh, spawn_fresh, tmp_path, redis):
    key = _learn_key(run_fresh, tmp_path)
    holder = _hold("remote", redis.url, key, "3000")  # renewed every second while alive
    try:
        waiter = spawn_fresh("mlp", env={"AOTCACHE_DIR": str(tmp_path / "b"), "AOTCACHE_REMOTE": redis.url})
        waiter.wait_for_output("being compiled on another machine")
        time.sleep(4)  # longer than the lease: the live holder's renewals keep it
        holder.kill()
        t_killed = time.monotonic()
        r = waiter.result()
    finally:
        holder.kill()
        holder.wait()
    assert (r.stats["misses"], r.stats["wait"]["waited"], r.stats["remote"]["lease_waits"]) == (1, 1, 1)
    assert "timeouts" not in r.stats["wait"]
    assert r.stats["wait"]["seconds"] >= 4  # it waited while the holder lived
    assert time.monotonic() - t_killed < 120
    assert redis.store().get(key) is not None  # the waiter published its own compile


@needs_redis
def test_symbolic_graphs_use_the_remote_tier(run_fresh, tmp_path, redis):
    def machine(name: str) -> dict:
        return {"AOTCACHE_DIR": str(tmp_path / name), "AOTCACHE_REMOTE": redis.url}

    a = run_fresh("shapes", "--sizes", "16,24", env=machine("a"))
    assert (a.stats["misses"], a.stats["hits"]) == (1, 0)  # one symbolic compile serves both sizes
    b = run_fresh("shapes", "--sizes", "16,24", env=machine("b"))  # empty directory: index and candidate remote
    assert (b.stats["misses"], b.stats["hits"]) == (0, 1)
    assert b.stats["remote"]["hits"] == 2  # the guard index, then the candidate
    assert_bitwise_equal(a.tensors, b.tensors)
    # A size the candidate's guards exclude (1: 0/1 specialization) compiled on a third machine, then served to a
    # fourth from the remote tier beside the symbolic candidate.
    c = run_fresh("shapes", "--sizes", "1", env=machine("c"))
    assert c.stats["misses"] == 1
    d = run_fresh("shapes", "--sizes", "1,16", env=machine("d"))
    assert (d.stats["misses"], d.stats["hits"]) == (0, 2), d.stats


def test_exclusive_serializes_read_modify_writes_of_one_key(tmp_path):
    """`single_flight.exclusive` (a frame entry's candidates are read, extended and written under it): a second
    writer waits for the first to finish, and gives up after its bound rather than block (then writes unprotected)."""
    import threading

    from aotcache import _core
    from aotcache.storage import single_flight

    store = _core.LocalStore.open(str(tmp_path / "cache"))
    key = "ab" * 32
    entered, release = threading.Event(), threading.Event()
    log: list[str] = []

    def first() -> None:
        with single_flight.exclusive(store, key) as held:
            log.append(f"first in {held}")
            entered.set()
            release.wait(10)
            log.append("first out")

    t = threading.Thread(target=first)
    t.start()
    assert entered.wait(10)
    t0 = time.monotonic()
    with single_flight.exclusive(store, key, wait_s=0.3) as held:
        assert not held and time.monotonic() - t0 >= 0.3  # bounded: gave up
    threading.Timer(0.3, release.set).start()
    with single_flight.exclusive(store, key) as held:
        log.append(f"second in {held}")
    t.join(10)
    assert log == ["first in True", "first out", "second in True"]
