"""aotcache export / import / verify --fix and the progress bar, through the installed CLI."""

from __future__ import annotations

import json
import os
import pty
import random
import subprocess
import sys
from pathlib import Path

import pytest

from aotcache import _core
from conftest import SUPPORT, assert_bitwise_equal, cli

sys.path.insert(0, str(SUPPORT))
from store_worker import key_for, payload  # noqa: E402

EXE = Path(sys.executable).parent / "aotcache"


def _fill(cache_dir: Path, n: int, size: int = 20_000) -> list[str]:
    store = _core.LocalStore.open(str(cache_dir))
    rng = random.Random(n)
    keys = []
    for slot in range(n):
        k = key_for(slot)
        store.put(k, payload(rng, size), {"compile_seconds": 1.0 + slot})
        keys.append(k.hex)
    return keys


def _entry_files(cache_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (cache_dir / "entries").rglob("*.aotc")}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=120)


def test_export_import_round_trip_is_byte_identical(tmp_path):
    src, dst, archive = tmp_path / "src", tmp_path / "dst", tmp_path / "cache.aotcar"
    keys = _fill(src, 5)
    assert "exported 5 entries" in cli(src, "export", str(archive))
    assert "imported 5 entries" in cli(dst, "import", str(archive))
    assert _entry_files(dst) == _entry_files(src)
    assert "0 bad" in cli(dst, "verify")
    # Selected keys, by unique prefix.
    part = tmp_path / "part.aotcar"
    assert "exported 2 entries" in cli(src, "export", str(part), keys[0][:12], keys[3])
    other = tmp_path / "other"
    cli(other, "import", str(part))
    assert {e["key"] for e in json.loads(cli(other, "ls", "--json"))} == {keys[0], keys[3]}
    cli(src, "export", str(tmp_path / "x.aotcar"), "ffff0000", expect_rc=1)  # no such entry


def test_corrupted_archive_imports_the_good_entries_and_fails(tmp_path):
    src, archive = tmp_path / "src", tmp_path / "cache.aotcar"
    _fill(src, 4)
    cli(src, "export", str(archive))
    data = bytearray(archive.read_bytes())
    # Flip a byte inside the second entry's payload (records: 16-byte header, then u64 length + entry bytes).
    first_len = int.from_bytes(data[16:24], "little")
    second_start = 24 + first_len + 8
    data[second_start + 500] ^= 0xFF
    archive.write_bytes(bytes(data))
    dst = tmp_path / "dst"
    proc = _run("--dir", str(dst), "import", str(archive))
    assert proc.returncode == 1
    assert "imported 3 entries" in proc.stdout and "1 bad (skipped)" in proc.stdout, proc.stdout
    assert "skipping entry #2" in proc.stderr and "checksum mismatch" in proc.stderr, proc.stderr
    assert len(json.loads(cli(dst, "ls", "--json"))) == 3
    # A truncated archive: the entries before the cut are imported, the damage is reported.
    archive.write_bytes(bytes(data[: second_start + 1000]))
    dst2 = tmp_path / "dst2"
    proc = _run("--dir", str(dst2), "import", str(archive))
    assert proc.returncode == 1
    assert "imported 1 entries" in proc.stdout and "archive damaged" in proc.stdout, proc.stdout
    assert "truncated" in proc.stderr or "beyond the file" in proc.stderr, proc.stderr
    # Not an archive at all.
    archive.write_bytes(b"hello")
    proc = _run("--dir", str(dst2), "import", str(archive))
    assert proc.returncode == 1 and "not an aotcache archive" in proc.stderr


def test_verify_fix_quarantines_and_counts(tmp_path):
    cache = tmp_path / "c"
    keys = _fill(cache, 3)
    store = _core.LocalStore.open(str(cache))
    bad = Path(store.entry_path(keys[1]))
    data = bytearray(bad.read_bytes())
    data[200] ^= 1
    bad.write_bytes(bytes(data))
    assert "1 bad" in cli(cache, "verify", expect_rc=1)
    assert bad.exists()  # verify alone changes nothing
    out = cli(cache, "verify", "--fix")
    assert "1 quarantined" in out and "quarantine: 1 files" in out
    assert not bad.exists()
    quarantined = list((cache / "quarantine").iterdir())
    assert len(quarantined) == 1 and keys[1] in quarantined[0].name
    stats = json.loads(cli(cache, "stats", "--json"))
    assert stats["counters"]["corrupt"] == 1 and stats["quarantined_files"] == 1
    assert "0 bad" in cli(cache, "verify")
    # A corrupt entry met by a lookup is quarantined too, and the lookup is a miss afterwards.
    bad0 = Path(store.entry_path(keys[0]))
    bad0.write_bytes(bad0.read_bytes()[:-5])
    try:
        store.get(keys[0])
        raise AssertionError("a corrupt entry was served")
    except _core.CorruptEntryError:
        pass
    assert store.get(keys[0]) is None
    assert json.loads(cli(cache, "stats", "--json"))["counters"]["corrupt"] == 2


def test_progress_bar_only_on_a_terminal(tmp_path):
    cache = tmp_path / "c"
    _fill(cache, 3, size=100)
    piped = _run("--dir", str(cache), "verify")
    assert piped.returncode == 0 and piped.stderr == ""
    # stderr on a pseudo-terminal: the bar is drawn.
    master, slave = pty.openpty()
    proc = subprocess.run(
        [str(EXE), "--dir", str(cache), "verify"], stdout=subprocess.PIPE, stderr=slave, text=True, timeout=60
    )
    os.close(slave)
    drawn = os.read(master, 4096).decode()
    os.close(master)
    assert proc.returncode == 0
    assert "verify [" in drawn and "3/3" in drawn and "100%" in drawn, drawn


def test_bad_eviction_policy_is_a_usage_error(tmp_path):
    proc = subprocess.run(
        [str(EXE), "--dir", str(tmp_path / "c"), "prune"],
        capture_output=True,
        text=True,
        env=dict(os.environ, AOTCACHE_EVICTION="random"),
    )
    assert proc.returncode == 2 and "saved-per-byte" in proc.stderr


KEY_A = "a:0123456789abcdef-secret-a"
KEY_B = "b:0123456789abcdef-secret-b"


def _run_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=120, env=dict(os.environ, **env))


def test_untrusted_entries_are_left_in_place(tmp_path):
    # Two key sets share a directory (a rotation in progress): neither may destroy the other's entries.
    cache = tmp_path / "c"
    unsigned = _fill(cache, 2)
    store_b = _core.LocalStore.open(str(cache), signing_key=KEY_B)
    store_b.put(key_for(7), payload(random.Random(7), 100), {"compile_seconds": 1.0})
    before = _entry_files(cache)
    store_a = _core.LocalStore.open(str(cache), signing_key=KEY_A)
    for key in [*unsigned, key_for(7).hex]:
        with pytest.raises(_core.UntrustedEntryError) as raised:
            store_a.get(key)
        assert not isinstance(raised.value, _core.CorruptEntryError)
    assert store_b.get(key_for(7).hex) is not None  # its owner still reads it
    proc = _run_env({"AOTCACHE_SIGNING_KEY": KEY_A}, "--dir", str(cache), "verify", "--fix")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 entries checked, 0 bad, 0 quarantined, 3 untrusted" in proc.stdout
    assert proc.stdout.count("  untrusted: ") == 3 and "left in place" in proc.stdout
    # An accepted key verifies: the old key's entry passes, the unsigned ones stay untrusted.
    proc = _run_env(
        {"AOTCACHE_SIGNING_KEY": KEY_A, "AOTCACHE_SIGNING_KEYS_ACCEPTED": KEY_B}, "--dir", str(cache), "verify"
    )
    assert proc.returncode == 0 and ", 2 untrusted" in proc.stdout, proc.stdout
    assert _entry_files(cache) == before and not (cache / "quarantine").exists()
    assert store_a.quarantined() == [] and "corrupt" not in store_a.read_counters()
    # A malformed key is a usage error, and never printed.
    proc = _run_env({"AOTCACHE_SIGNING_KEYS_ACCEPTED": "b:0123456789abcdef-secret-x"}, "--dir", str(cache), "ls")
    assert proc.returncode == 2 and "without a signing key" in proc.stderr and "secret-x" not in proc.stderr


def test_tiny_bounds_are_enforced(tmp_path):
    cache = tmp_path / "c"
    _fill(cache, 3, size=100)
    assert "removed 3 entries" in cli(cache, "prune", "--max-size", "5")
    _fill(cache, 3, size=100)
    proc = _run_env({"AOTCACHE_MAX_SIZE": "5"}, "--dir", str(cache), "prune")
    assert proc.returncode == 0 and "removed 3 entries" in proc.stdout, proc.stdout + proc.stderr
    # The store's own bound after each put: a bound below 10 bytes used to evict nothing (90% of it was 0).
    for bound in (1, 5, 9):
        store = _core.LocalStore.open(str(cache), max_size=bound)
        store.put(key_for(1), payload(random.Random(1), 100), {})
        assert store.list() == [] and store.size() == (0, 0), bound


def test_imported_cache_hits_in_a_fresh_process(tmp_path, run_fresh, cache_dir):
    cold = run_fresh("mlp")
    assert cold.stats["misses"] >= 1
    archive = tmp_path / "warm.aotcar"
    cli(cache_dir, "export", str(archive))
    imported = tmp_path / "imported"
    cli(imported, "import", str(archive))
    warm = run_fresh("mlp", env={"AOTCACHE_DIR": str(imported)})
    assert warm.stats["hits"] == cold.stats["misses"] and warm.stats["misses"] == 0
    assert warm.aot_autograd == {}  # loaded by aotcache, not compiled by AOTAutograd
    assert_bitwise_equal(cold.tensors, warm.tensors)


def _commands() -> list[str]:
    """The subcommands the overview lists (the CLI's own table, src/cli/help.cc)."""
    out = _run("--help")
    assert out.returncode == 0
    lines = out.stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [ln.split()[0] for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]


def test_every_subcommand_answers_help_with_its_usage(tmp_path):
    """`aotcache CMD --help` (and -h, and `aotcache help CMD`) prints that command's usage and exits 0, without a
    cache directory; before the fix `aotcache run --help` ran a program named --help (exit 127) and the others
    printed the overview."""
    commands = _commands()
    assert set(commands) >= {"stats", "ls", "show", "explain", "rm", "clear", "prune", "verify", "export", "import"}
    assert "run" in commands
    env = {**os.environ, "AOTCACHE_DIR": str(tmp_path / "none")}
    for name in commands:
        for args in ([name, "--help"], [name, "-h"], ["help", name], ["--dir", str(tmp_path), name, "--help"]):
            out = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=60, env=env)
            assert out.returncode == 0, (args, out.stderr)
            assert out.stdout.startswith(f"usage: aotcache {name}"), (args, out.stdout)
            assert len(out.stdout.splitlines()) >= 3, out.stdout  # a description, not only the usage line
    assert not (tmp_path / "none").exists()  # help never opens (nor creates) a cache directory
    bad = _run("nope", "--help")
    assert bad.returncode == 2 and "unknown command 'nope'" in bad.stderr


def test_run_takes_its_own_options_before_the_command(tmp_path):
    show = ["sh", "-c", 'echo "$AOTCACHE_ENABLE $AOTCACHE_DIR $*"', "sh"]
    out = _run("run", "--dir", str(tmp_path / "a"), *show, "--help")
    assert out.returncode == 0 and out.stdout.split() == ["1", str(tmp_path / "a"), "--help"]  # the command's own
    out = _run("run", f"--dir={tmp_path / 'b'}", "--", *show, "x")
    assert out.stdout.split() == ["1", str(tmp_path / "b"), "x"]
    out = _run("--dir", str(tmp_path / "c"), "run", *show)  # the global --dir still applies
    assert out.stdout.split() == ["1", str(tmp_path / "c")]
    unknown = _run("run", "--bogus", "true")
    assert unknown.returncode == 2 and "unknown option --bogus" in unknown.stderr
    assert "usage: aotcache run" in unknown.stderr
    missing = _run("run", "--dir", str(tmp_path))
    assert missing.returncode == 2 and "a command to run is needed" in missing.stderr
    assert _run("run", "--", "/no/such/program").returncode == 127
