"""A cache directory another user could have written is not loaded from unless entries are signed
(storage/trust.py, storage/opened.py), and the store creates its directories private."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess

import pytest

from aotcache import counters, settings
from aotcache.storage import opened, trust


def _reason(directory: str) -> str | None:
    verdict = trust.judge(directory)
    return verdict.reason if verdict else None


def _cfg(directory, **kw):
    return settings.Settings(**{**settings.current().__dict__, "cache_dir": str(directory), **kw})


@pytest.fixture(autouse=True)
def _fresh_state():
    counters.reset()
    opened._stores.clear()
    opened._untrusted.clear()
    yield
    opened._stores.clear()
    opened._untrusted.clear()


def test_a_new_store_is_private(tmp_path):
    d = tmp_path / "new" / "cache"
    assert opened.local_store(_cfg(d)) is not None
    for path in [d, *[p for p in d.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, path
    assert _reason(str(d)) is None


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_directory_others_can_write_is_refused_unsigned(tmp_path, caplog, mode):
    d = tmp_path / "shared"
    assert opened.local_store(_cfg(d)) is not None  # created private, used
    opened._stores.clear()
    opened._untrusted.clear()
    os.chmod(d, mode)
    with caplog.at_level(logging.WARNING, logger="aotcache"):
        assert opened.local_store(_cfg(d)) is None
        assert opened.local_store(_cfg(d)) is None
    assert counters.snapshot()["untrusted"] == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # one WARNING per process and directory
    assert "chmod -R go-w" in warnings[0] and "AOTCACHE_SIGNING_KEY" in warnings[0]


def test_a_writable_subdirectory_is_refused_too(tmp_path):
    d = tmp_path / "c"
    assert opened.local_store(_cfg(d)) is not None
    sub = next(p for p in d.iterdir() if p.is_dir())
    os.chmod(sub, 0o777)
    assert "can be written by others" in _reason(str(d))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_a_directory_another_user_owns_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, -1)
    assert "owned by uid 65534" in _reason(str(d))


def test_signed_entries_make_any_directory_usable(tmp_path):
    d = tmp_path / "shared"
    assert opened.local_store(_cfg(d)) is not None
    opened._stores.clear()
    os.chmod(d, 0o777)
    assert opened.local_store(_cfg(d, signing_key="team:" + "k" * 32)) is not None
    assert counters.snapshot()["untrusted"] == 0


def test_a_folder_above_that_others_can_write_is_refused(tmp_path):
    above = tmp_path / "team"
    above.mkdir()
    d = above / "cache"
    assert opened.local_store(_cfg(d)) is not None  # created private, below a private folder: used
    assert _reason(str(d)) is None
    os.chmod(above, 0o777)  # others could move `cache` aside and put theirs in its place
    assert "a folder above it, can be written by others" in _reason(str(d))
    assert "a folder above it" in _reason(str(above / "not-yet" / "cache"))
    os.chmod(above, 0o777 | stat.S_ISVTX)  # sticky, like /tmp: they cannot rename what they do not own
    assert _reason(str(d)) is None


def test_a_symlinked_directory_is_judged_by_where_it_points(tmp_path):
    d = tmp_path / "real"
    assert opened.local_store(_cfg(d)) is not None
    link = tmp_path / "link"
    link.symlink_to(d)
    assert _reason(str(link)) is None  # the link's own mode (rwxrwxrwx) says nothing
    os.chmod(d, 0o777)
    assert "can be written by others" in _reason(str(link))


@pytest.mark.parametrize("mode", [0o666, 0o664, 0o646])
def test_an_unsigned_entry_file_others_can_write_is_not_loaded(tmp_path, mode):
    import random

    from aotcache import _core
    from store_worker import key_for, payload

    store = _core.LocalStore.open(str(tmp_path / "c"))
    key = key_for(1)
    store.put(key, payload(random.Random(1), 100), {})
    assert store.get(key.hex) is not None
    os.chmod(store.entry_path(key.hex), mode)  # a loose umask, or chmod'ed by a tool: anyone may rewrite it
    with pytest.raises(_core.UntrustedEntryError, match="can be written by another user"):
        store.get(key.hex)
    os.chmod(store.entry_path(key.hex), 0o644)
    assert store.get(key.hex) is not None
    signed = _core.LocalStore.open(str(tmp_path / "s"), signing_key="team:" + "k" * 32)
    signed.put(key, payload(random.Random(1), 100), {})
    os.chmod(signed.entry_path(key.hex), 0o666)
    assert signed.get(key.hex) is not None  # signed: the HMAC vouches for it, whoever could write the file


# ---- umask: what the cache makes is private whatever the umask (issue 40) --------------------------------------------


@pytest.fixture
def umask():
    """umask(mask): sets this process's umask for the rest of the test."""
    before = os.umask(0o022)
    os.umask(before)
    yield os.umask
    os.umask(before)


def _loose_paths(root) -> list[str]:
    """Every folder and file below `root` (itself included) that group or others can read or write."""
    return [str(p) for p in [root, *root.rglob("*")] if stat.S_IMODE(os.lstat(p).st_mode) & 0o077]


@pytest.mark.parametrize("mask", [0o002, 0o000])
def test_what_python_writes_beside_the_store_is_private_whatever_the_umask(tmp_path, umask, mask):
    from aotcache import isa_probe
    from aotcache.storage import private_files

    umask(mask)
    d = tmp_path / "new" / "cache"
    assert opened.local_store(_cfg(d)) is not None
    memo = isa_probe.memo_path(str(d), {"machine": "m"})
    isa_probe._write_memo(memo, {"machine": "m"}, {"probe": True})
    private_files.makedirs(str(tmp_path / "new" / "a" / "b"))
    with private_files.open_append(str(tmp_path / "new" / "a" / "log")) as f:
        f.write("x\n")
    assert _loose_paths(tmp_path / "new") == []
    assert isa_probe.read_memo(memo, {"machine": "m"}) == {"probe": True}
    assert trust.judge(str(d)) is None


def test_memo_folders_agree_with_the_probe():
    from aotcache import isa_probe

    assert isa_probe.MEMO_DIR in opened.MEMO_DIRS


def test_a_probe_memo_another_user_could_write_is_discarded_and_remade_private(tmp_path, caplog):
    """A cache made by the release before this one under umask 002 has a group-writable probes/: the memo (cheap to
    rebuild) is discarded, never read, and the directory is used without a warning."""
    from aotcache import isa_probe

    d = tmp_path / "c"
    assert opened.local_store(_cfg(d)) is not None
    probes = d / isa_probe.MEMO_DIR
    probes.mkdir(mode=0o775)
    os.chmod(probes, 0o775)  # as os.makedirs made it under umask 002
    (probes / "vec-isa-x.json").write_text("{}")
    opened._stores.clear()
    opened._untrusted.clear()
    with caplog.at_level(logging.INFO, logger="aotcache"):
        assert opened.local_store(_cfg(d)) is not None
    assert not probes.exists()
    assert counters.snapshot().get("untrusted", 0) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("discarded" in r.getMessage() for r in caplog.records)
    # A private probes/ is kept as it is.
    probes.mkdir(mode=0o700)
    (probes / "vec-isa-x.json").write_text("{}")
    os.chmod(probes / "vec-isa-x.json", 0o600)
    assert trust.discard_open_memos(str(d), opened.MEMO_DIRS) == []
    assert (probes / "vec-isa-x.json").exists()
    # A memo file another user could write, in a private folder, is discarded with its folder.
    os.chmod(probes / "vec-isa-x.json", 0o666)
    assert trust.discard_open_memos(str(d), opened.MEMO_DIRS) == [str(probes)]


def test_a_too_open_probe_memo_in_a_too_open_cache_is_left_and_refused(tmp_path):
    from aotcache import isa_probe

    d = tmp_path / "c"
    assert opened.local_store(_cfg(d)) is not None
    (d / isa_probe.MEMO_DIR).mkdir(mode=0o777)
    os.chmod(d / isa_probe.MEMO_DIR, 0o777)
    os.chmod(d, 0o775)  # not ours to repair: someone made the whole directory shared
    opened._stores.clear()
    opened._untrusted.clear()
    assert opened.local_store(_cfg(d)) is None
    assert (d / isa_probe.MEMO_DIR).exists()


@pytest.mark.parametrize("folder", ["", "entries", "locks"])
def test_any_other_too_open_folder_keeps_the_refusal_with_the_command_that_fixes_it(tmp_path, caplog, folder):
    d = tmp_path / "my cache"
    assert opened.local_store(_cfg(d)) is not None
    (d / "locks").mkdir(mode=0o700, exist_ok=True)
    os.chmod(d / folder, 0o775)
    opened._stores.clear()
    opened._untrusted.clear()
    with caplog.at_level(logging.WARNING, logger="aotcache"):
        assert opened.local_store(_cfg(d)) is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    command = f"chmod -R go-w '{d}'"
    assert f"`{command}`" in warning, warning
    subprocess.run(command, shell=True, check=True)  # the command it names makes the directory trusted
    assert trust.judge(str(d)) is None


def test_a_folder_above_names_its_own_command(tmp_path):
    above = tmp_path / "team"
    above.mkdir()
    d = above / "cache"
    assert opened.local_store(_cfg(d)) is not None
    os.chmod(above, 0o777)
    verdict = trust.judge(str(d))
    assert f"chmod o-w {above}" in verdict.fix
    os.chmod(above, 0o755)
    assert trust.judge(str(d)) is None


def test_a_probe_memo_file_another_user_could_write_is_not_read(tmp_path):
    from aotcache import isa_probe

    memo = isa_probe.memo_path(str(tmp_path), {"machine": "m"})
    isa_probe._write_memo(memo, {"machine": "m"}, {"probe": True})
    assert isa_probe.read_memo(memo, {"machine": "m"}) == {"probe": True}
    os.chmod(memo, 0o666)
    assert isa_probe.read_memo(memo, {"machine": "m"}) == {}


def test_two_processes_under_a_loose_umask_hit_without_warning(run_fresh, cache_dir):
    """The first process compiles and stores under umask 002 (a private group per user) or 000, the second hits,
    nothing is refused or warned; a folder made group-writable by someone else afterwards is still refused."""
    for mask in (0o002, 0o000):
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        cold = run_fresh("mlp", umask=mask)
        warm = run_fresh("mlp", umask=mask)
        for run in (cold, warm):
            assert "is not used" not in run.stdout and run.stats.get("untrusted", 0) == 0, run.stdout
            assert not [ln for ln in run.stdout.splitlines() if "WARNING" in ln], run.stdout
        assert (cold.stats["misses"], warm.stats["hits"], warm.stats["misses"], warm.stats["errors"]) == (1, 1, 0, 0)
        assert _loose_paths(cache_dir) == [], oct(mask)
    os.chmod(cache_dir / "entries", 0o775)  # someone else opened it to the group: the trust rule holds
    refused = run_fresh("mlp", umask=0o002)
    assert refused.stats["untrusted"] >= 1 and refused.stats["hits"] == 0
    assert f"`chmod -R go-w {cache_dir}`" in refused.stdout
