"""A full disk and a read-only cache directory, for real: tmpfs mounts (size-limited, then remounted read-only).
The compile must proceed, the error must be counted, and reported once per process, not at every compile.

Mounting needs root with CAP_SYS_ADMIN (root alone cannot make a directory unwritable to itself: chmod does not
stop root). Without it those tests skip; the injected-fault tests below run everywhere: the backend's store is
opened over the fault-injecting file system (`_core.LocalStore.open_with_fault`), the same wrapper the C++ tests use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotcache import _core
from conftest import SUPPORT

HERE = SUPPORT


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size) -> a fresh tmpfs directory of that many bytes; remount_ro(path) makes it read-only."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        d = tmp_path / f"mnt{len(mounted)}"
        d.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], capture_output=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", str(d)], check=False)


def _run(cache_dir: Path, inductor_dir: Path, *fault: str) -> dict:
    env = dict(os.environ, AOTCACHE_DIR=str(cache_dir), TORCHINDUCTOR_CACHE_DIR=str(inductor_dir))
    proc = subprocess.run(
        [sys.executable, str(HERE / "fault_workload.py"), *fault], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _fill(directory: Path) -> None:
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_full_disk_compiles_counts_and_warns_once(tmpfs, inductor_dir):
    mnt = tmpfs(1 << 20)
    cache = mnt / "aotcache"
    _core.LocalStore.open(str(cache))  # the store's layout, before the disk fills (the CLI never creates one)
    _fill(mnt)
    result = _run(cache, inductor_dir)
    assert result["ok"]
    stats = result["stats"]
    assert stats["misses"] == 3 and stats["hits"] == 0
    assert stats["error_kinds"]["store_write"] == 3
    assert stats["errors"] >= 3
    store_warnings = [w for w in result["warnings"] if w.startswith("cannot store entry")]
    assert len(store_warnings) == 1, result["warnings"]
    assert "No space left on device" in store_warnings[0]
    assert list((cache / "tmp").iterdir()) == []  # the partial temp files were removed
    assert not list((cache / "entries").rglob("*.aotc"))


def test_read_only_directory_serves_hits_and_warns_once(tmpfs, inductor_dir):
    mnt = tmpfs(64 << 20)
    cache = mnt / "aotcache"
    first = _run(cache, inductor_dir)
    assert first["ok"] and first["stats"]["misses"] == 3
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    second = _run(cache, inductor_dir)
    assert second["ok"]
    assert second["stats"]["hits"] == 3  # a read-only cache still serves
    # The statistics cannot be written: each failed write counted, reported once. Served frames' counts are
    # deferred and written together (counters.record(defer=True)), so one process may make a single write.
    assert second["stats"]["error_kinds"]["stats_write"] >= 1
    stats_warnings = [w for w in second["warnings"] if w.startswith("could not update statistics")]
    assert len(stats_warnings) == 1, second["warnings"]
    assert "Read-only file system" in stats_warnings[0]


def test_read_only_directory_without_entries_compiles_and_warns_once(tmpfs, inductor_dir):
    mnt = tmpfs(64 << 20)
    cache = mnt / "aotcache"
    _core.LocalStore.open(str(cache))  # the store's layout, before the disk fills (the CLI never creates one)
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    result = _run(cache, inductor_dir)
    assert result["ok"] and result["stats"]["misses"] == 3
    assert result["stats"]["error_kinds"]["store_write"] == 3
    store_warnings = [w for w in result["warnings"] if w.startswith("cannot store entry")]
    assert len(store_warnings) == 1, result["warnings"]
    assert "Read-only file system" in store_warnings[0]


@pytest.mark.parametrize(
    "fault, errno_text",
    [("enospc", "No space left on device"), ("erofs", "Read-only file system"), ("eacces", "Permission denied")],
)
def test_injected_write_fault_compiles_counts_and_warns_once(tmp_path, inductor_dir, fault, errno_text):
    cache = tmp_path / "aotcache"
    result = _run(cache, inductor_dir, fault)
    assert result["ok"]
    stats = result["stats"]
    assert stats["misses"] == 3 and stats["error_kinds"]["store_write"] == 3
    store_warnings = [w for w in result["warnings"] if w.startswith("cannot store entry")]
    assert len(store_warnings) == 1, result["warnings"]
    assert errno_text in store_warnings[0]
    assert list((cache / "tmp").iterdir()) == []
    assert not list((cache / "entries").rglob("*.aotc"))
