"""Who may have written a cache directory, the way ssh judges a loose `~/.ssh`.

An entry carries code a hit runs (a frame's bytecode, the graphs' generated Python, kernel libraries). Without a
signing key, the only thing that vouches for an entry is who could have written it: a directory that another user
owns, or that group or others may write (a team's shared directory, a path under /tmp), lets that user plant code
in every process that loads from it. Such a directory is not used unless entries are signed
(`AOTCACHE_SIGNING_KEY`: every entry's HMAC is checked before any of it is decoded).

Checked once per process and store:
- the directory and its subdirectories (two levels: the store's own folders and the entries' shard folders below
  them): owned by this user (or root), not writable by group or others;
- every folder above it: owned by this user or root, and not writable by others unless sticky (`/tmp`: others
  cannot rename or replace what they do not own there) — a folder above that others may write lets them move the
  cache directory aside and put their own in its place; group-writable is accepted only for this user's own
  primary group (the user-private-group convention of most distributions);
- each entry file, when it is read, by the store itself (C++ `LocalStore::read_entry_file`): owned by this user or
  root, not writable by group or others.
Root's own directories are trusted as the user's.

Every refusal names the command that fixes it (`Distrust.fix`). One folder is repaired instead of refused: a memo
that any process can rebuild (`probes/`, the vector-ISA probe memo, which releases before 0.9 made with the umask's
mode) that another user could have written is discarded, never read, and made again private
(`discard_open_memos`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import shutil
import stat

log = logging.getLogger("aotcache")

SIGNING_ADVICE = "or sign entries (AOTCACHE_SIGNING_KEY, the same key in every process that shares it)"


@dataclasses.dataclass(frozen=True)
class Distrust:
    """Why another user could have written a cache directory, and the command that makes it trusted."""

    reason: str
    fix: str

    def __str__(self) -> str:
        return self.reason


def judge(directory: str) -> Distrust | None:
    """None when only this user (or root) can have written `directory` and the folders in it; else why not and
    what fixes it."""
    me = os.geteuid()
    named = os.path.abspath(directory)
    directory = os.path.realpath(directory)  # a symlink's own mode says nothing; where it points, and where it lies
    if named != directory:
        verdict = _ancestor_verdict(_existing_ancestor(os.path.dirname(named)), me)
        if verdict:
            return verdict
    try:
        paths = [directory]
        with os.scandir(directory) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    paths.append(e.path)
                    with os.scandir(e.path) as inner:
                        paths += [i.path for i in inner if i.is_dir(follow_symlinks=False)]
        for path in paths:
            st = os.stat(path, follow_symlinks=False)
            if st.st_uid not in (me, 0):
                return Distrust(
                    f"{path} is owned by uid {st.st_uid}, not this user ({me})",
                    f"use a cache directory of your own (AOTCACHE_DIR), or have its owner or root run "
                    f"`chown -R {me} {shlex.quote(directory)}`",
                )
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                who = "others" if st.st_mode & stat.S_IWOTH else "its group"
                return Distrust(
                    f"{path} can be written by {who} (mode {stat.filemode(st.st_mode)})",
                    f"run `chmod -R go-w {shlex.quote(directory)}`",
                )
        return _ancestor_verdict(os.path.dirname(directory), me)
    except FileNotFoundError:
        # Nothing written yet: the store creates it private, below folders that must already be safe.
        return _ancestor_verdict(_existing_ancestor(directory), me)
    except OSError as e:
        return Distrust(f"cannot inspect {directory}: {e}", "make it readable by you, or use another AOTCACHE_DIR")


def _existing_ancestor(directory: str) -> str:
    path = os.path.abspath(directory)
    while not os.path.isdir(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def _ancestor_verdict(path: str, me: int) -> Distrust | None:
    """None when no other user can replace anything below `path` (the folders from `path` up to /)."""
    while True:
        try:
            st = os.stat(path)
        except OSError as e:
            return Distrust(f"cannot inspect {path}: {e}", "use another AOTCACHE_DIR")
        sticky = bool(st.st_mode & stat.S_ISVTX)
        elsewhere = "use a cache directory below folders only you can write (AOTCACHE_DIR)"
        if st.st_uid not in (me, 0):
            return Distrust(f"{path}, a folder above it, is owned by uid {st.st_uid}, not this user ({me})", elsewhere)
        if st.st_mode & stat.S_IWOTH and not sticky:
            return Distrust(
                f"{path}, a folder above it, can be written by others (mode {stat.filemode(st.st_mode)})",
                f"run `chmod o-w {shlex.quote(path)}` (or `chmod +t` it), or {elsewhere}",
            )
        if st.st_mode & stat.S_IWGRP and not sticky and st.st_gid != os.getegid():
            return Distrust(
                f"{path}, a folder above it, can be written by its group (mode {stat.filemode(st.st_mode)})",
                f"run `chmod g-w {shlex.quote(path)}`, or {elsewhere}",
            )
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def discard_open_memos(directory: str, names: tuple[str, ...]) -> list[str]:
    """Removes each folder `directory/<name>` that another user could have written, where `name` holds only a memo
    any process can rebuild (nothing in it is trusted; the next writer makes it again, private). Only inside a cache
    directory that is this user's and private itself: otherwise its refusal stands and nothing is touched. The
    folder is first renamed aside (so no process reads a half-removed memo), then deleted. Returns the paths
    discarded; never raises."""
    discarded = []
    try:
        directory = os.path.realpath(directory)
        st = os.stat(directory)
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return discarded
        for name in names:
            path = os.path.join(directory, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode) or _private_tree(path):
                continue
            aside = os.path.join(directory, f".{name}.discarded.{os.getpid()}")
            try:
                os.rename(path, aside)
            except FileNotFoundError:  # another process discarded it first
                continue
            shutil.rmtree(aside, ignore_errors=True)
            log.info("aotcache: discarded %s: another user could have written it (it is remade private)", path)
            discarded.append(path)
    except OSError as e:
        log.info("aotcache: cannot check the memo folders of %s: %s", directory, e)
    return discarded


def _private_tree(path: str) -> bool:
    """Whether `path` and every folder and file in it is this user's (or root's) and not writable by others."""
    me = os.geteuid()
    for root, dirs, files in os.walk(path):
        for p in [root, *(os.path.join(root, n) for n in dirs + files)]:
            st = os.lstat(p)
            if st.st_uid not in (me, 0) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
    return True
