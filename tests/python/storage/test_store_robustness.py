"""The local store under concurrent processes, writers killed mid-write, and a size bound (no torch compile)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from aotcache import _core
from conftest import SUPPORT, cli

WORKER = SUPPORT / "store_worker.py"


def _spawn(cache_dir: Path, mode: str, seed: int, iterations: int) -> subprocess.Popen:
    # Writers are killed: they get no pipe, which would be left unclosed.
    out = subprocess.PIPE if mode == "mixed" else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(cache_dir), mode, str(seed), str(iterations)],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_eight_processes_read_and_write_the_same_keys(tmp_path):
    cache_dir = tmp_path / "cache"
    workers = [_spawn(cache_dir, "mixed", seed, 150) for seed in range(8)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    for w, out in zip(workers, outputs):
        assert w.returncode == 0 and out.startswith("OK"), out
    hits = sum(int(out.split("hits=")[1].split()[0]) for out in outputs)
    assert hits > 100  # the processes really read each other's entries
    assert "0 bad" in cli(cache_dir, "verify")
    assert list((cache_dir / "tmp").iterdir()) == []


def test_writers_killed_at_random_points_never_leave_a_corrupt_entry(tmp_path):
    cache_dir = tmp_path / "cache"
    _core.LocalStore.open(str(cache_dir))
    rng = random.Random(7)
    kills = 0
    for round_ in range(200):
        writer = _spawn(cache_dir, "writer", round_, 10_000)
        time.sleep(rng.uniform(0.05, 0.25))  # import + some puts, then die anywhere, mid-write included
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        kills += writer.returncode == -signal.SIGKILL
    assert kills == 200
    # Every entry that made it is whole; the temp files of the dead writers are cleaned when the store opens.
    report = cli(cache_dir, "verify")
    assert " 0 bad" in report, report
    entries = json.loads(cli(cache_dir, "ls", "--json"))
    assert entries and all(e["valid"] for e in entries)
    _core.LocalStore.open(str(cache_dir))
    assert list((cache_dir / "tmp").iterdir()) == []


def test_size_bound_evicts_least_recently_used(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    rng = random.Random(1)
    keys = [key_for(slot) for slot in range(5)]
    for k in keys[:4]:
        store.put(k, payload(rng, 200_000), {})
    old = time.time() - 1000
    for i, k in enumerate(keys[:4]):
        os.utime(store.entry_path(k.hex), (old + i, old + i))
    assert store.get(keys[0].hex) is not None  # a hit: entry 0 becomes the most recently used
    store.set_max_size(700_000)
    store.put(keys[4], payload(rng, 200_000), {})
    left = {e["key"] for e in json.loads(cli(cache_dir, "ls", "--json"))}
    assert left == {keys[0].hex, keys[3].hex, keys[4].hex}
    assert json.loads(cli(cache_dir, "stats", "--json"))["counters"]["evictions"] == 2


def test_cli_prune_verify_and_errors(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    rng = random.Random(2)
    for slot in range(3):
        store.put(key_for(slot), payload(rng, 50_000), {})
    bad = Path(store.entry_path(key_for(1).hex))
    data = bytearray(bad.read_bytes())
    data[100] ^= 1
    bad.write_bytes(bytes(data))
    assert "1 bad" in cli(cache_dir, "verify", expect_rc=1)
    assert "1 quarantined" in cli(cache_dir, "verify", "--fix")
    assert "0 bad" in cli(cache_dir, "verify")
    assert "removed 2 entries" in cli(cache_dir, "prune", "--max-size", "1K")
    cli(cache_dir, "prune", "--max-size", "lots", expect_rc=2)
    cli(cache_dir, "ls", "--sort", "color", expect_rc=2)
    cli(cache_dir, "show", "zz", expect_rc=2)
    cli(cache_dir, "show", "abcd", expect_rc=1)
    cli(cache_dir, "ls", "--sort", expect_rc=2)
    cli(cache_dir, "ls", "--bogus", expect_rc=2)
    cli(cache_dir, "verify", "extra", expect_rc=2)
    cli(cache_dir, "stats", "--jsn", expect_rc=2)
    cli(cache_dir, "clear", "now", expect_rc=2)
    cli(cache_dir, "export", expect_rc=2)
    cli(cache_dir, "import", expect_rc=2)
    cli(cache_dir, "import", str(tmp_path / "missing.aotcar"), expect_rc=1)
    for order in ("size", "age", "saved"):
        cli(cache_dir, "ls", "--sort", order)


def test_cli_a_key_argument_gives_one_exit_code_whatever_the_command(tmp_path):
    """A malformed or ambiguous key is a bad argument (2) and a key that names no entry a failure (1), from every
    command that takes keys (explain said 1 where show said 2 for the same malformed key)."""
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    store.put(key_for(0), payload(random.Random(4), 1000), {})
    good = key_for(0).hex
    nomatch = "abcd" if not good.startswith("abcd") else "dcba"
    for bad, rc in (("zz", 2), (nomatch, 1)):
        cli(cache_dir, "show", bad, expect_rc=rc)
        cli(cache_dir, "explain", bad, good, expect_rc=rc)
        cli(cache_dir, "explain", good, bad, expect_rc=rc)
        cli(cache_dir, "rm", bad, expect_rc=rc)
        cli(cache_dir, "export", str(tmp_path / "x.aotcar"), bad, expect_rc=rc)


def test_cli_never_creates_a_missing_directory_except_to_import(tmp_path):
    missing = tmp_path / "typo"
    for args in (["stats"], ["stats", "--json"], ["ls"], ["show", "abcd"], ["verify"], ["prune"], ["clear"]):
        exe = Path(sys.executable).parent / "aotcache"
        proc = subprocess.run([str(exe), "--dir", str(missing), *args], capture_output=True, text=True)
        assert proc.returncode == 1 and "no cache directory at" in proc.stderr, (args, proc.returncode, proc.stderr)
        assert not missing.exists(), args
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    store.put(key_for(0), payload(random.Random(5), 1000), {})
    archive = tmp_path / "all.aotcar"
    cli(cache_dir, "export", str(archive))
    cli(missing, "import", str(archive))  # importing is what makes a new cache
    assert json.loads(cli(missing, "ls", "--json"))[0]["key"] == key_for(0).hex


def test_cli_explain_says_when_two_entries_are_of_different_kinds(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    store.put(key_for(0), payload(random.Random(6), 1000), {"payload_kind": "aotcache.frame"})
    store.put(key_for(1), payload(random.Random(7), 1000), {"payload_kind": "inductor_aot_artifact"})
    out = cli(cache_dir, "explain", key_for(0).hex, key_for(1).hex)
    assert "different kinds: A is a frame entry, B a graph entry" in out and "(absent)" not in out, out


def test_cli_dir_option_works_before_or_after_the_command(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    sys.path.insert(0, str(WORKER.parent))
    from store_worker import key_for, payload

    store.put(key_for(0), payload(random.Random(3), 1000), {})
    exe = Path(sys.executable).parent / "aotcache"
    for argv in (
        ["--dir", str(cache_dir), "ls", "--json"],
        ["ls", "--json", "--dir", str(cache_dir)],
        ["ls", f"--dir={cache_dir}", "--json"],
    ):
        proc = subprocess.run(
            [str(exe), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "AOTCACHE_DIR": str(tmp_path / "elsewhere")},
        )
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)) == 1, argv


def test_readers_never_see_a_torn_entry_while_others_evict(tmp_path):
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, AOTCACHE_WORKER_MAX_SIZE="1500000")  # entries up to 1 MB: eviction at most puts
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(cache_dir), "mixed", str(seed), "120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for seed in range(8)
    ]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    for w, out in zip(workers, outputs):
        assert w.returncode == 0 and out.startswith("OK"), out
    assert json.loads(cli(cache_dir, "stats", "--json"))["counters"]["evictions"] > 20
    assert "0 bad" in cli(cache_dir, "verify")
    # After verify's re-sync the ledger equals the files.
    ledger = (cache_dir / "ledger").read_text().split()
    files = json.loads(cli(cache_dir, "ls", "--json"))
    assert int(ledger[2]) == sum(e["size_bytes"] for e in files) and int(ledger[3]) == len(files)
