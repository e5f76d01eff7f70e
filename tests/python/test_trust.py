"""A cache directory another user could have written is not loaded from unless entries are signed
(storage/trust.py, storage/opened.py), and the store creates its directories private."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from aotcache import counters, settings
from aotcache.storage import opened, trust


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
    assert trust.untrusted_reason(str(d)) is None


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
    assert "can be written by others" in trust.untrusted_reason(str(d))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_a_directory_another_user_owns_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, -1)
    assert "owned by uid 65534" in trust.untrusted_reason(str(d))


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
    assert trust.untrusted_reason(str(d)) is None
    os.chmod(above, 0o777)  # others could move `cache` aside and put theirs in its place
    assert "a folder above it, can be written by others" in trust.untrusted_reason(str(d))
    assert "a folder above it" in trust.untrusted_reason(str(above / "not-yet" / "cache"))
    os.chmod(above, 0o777 | stat.S_ISVTX)  # sticky, like /tmp: they cannot rename what they do not own
    assert trust.untrusted_reason(str(d)) is None


def test_a_symlinked_directory_is_judged_by_where_it_points(tmp_path):
    d = tmp_path / "real"
    assert opened.local_store(_cfg(d)) is not None
    link = tmp_path / "link"
    link.symlink_to(d)
    assert trust.untrusted_reason(str(link)) is None  # the link's own mode (rwxrwxrwx) says nothing
    os.chmod(d, 0o777)
    assert "can be written by others" in trust.untrusted_reason(str(link))


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
