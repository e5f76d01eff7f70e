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
"""

from __future__ import annotations

import os
import stat


def untrusted_reason(directory: str) -> str | None:
    """None when only this user (or root) can have written `directory` and the folders in it; else why not."""
    me = os.geteuid()
    named = os.path.abspath(directory)
    directory = os.path.realpath(directory)  # a symlink's own mode says nothing; where it points, and where it lies
    if named != directory:
        reason = _ancestor_reason(_existing_ancestor(os.path.dirname(named)), me)
        if reason:
            return reason
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
                return f"{path} is owned by uid {st.st_uid}, not this user ({me})"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                who = "others" if st.st_mode & stat.S_IWOTH else "its group"
                return f"{path} can be written by {who} (mode {stat.filemode(st.st_mode)})"
        return _ancestor_reason(os.path.dirname(directory), me)
    except FileNotFoundError:
        # Nothing written yet: the store creates it private, below folders that must already be safe.
        return _ancestor_reason(_existing_ancestor(directory), me)
    except OSError as e:
        return f"cannot inspect {directory}: {e}"
    return None


def _existing_ancestor(directory: str) -> str:
    path = os.path.abspath(directory)
    while not os.path.isdir(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def _ancestor_reason(path: str, me: int) -> str | None:
    """None when no other user can replace anything below `path` (the folders from `path` up to /)."""
    while True:
        try:
            st = os.stat(path)
        except OSError as e:
            return f"cannot inspect {path}: {e}"
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid not in (me, 0):
            return f"{path}, a folder above it, is owned by uid {st.st_uid}, not this user ({me})"
        if st.st_mode & stat.S_IWOTH and not sticky:
            return f"{path}, a folder above it, can be written by others (mode {stat.filemode(st.st_mode)})"
        if st.st_mode & stat.S_IWGRP and not sticky and st.st_gid != os.getegid():
            return f"{path}, a folder above it, can be written by its group (mode {stat.filemode(st.st_mode)})"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def advice(directory: str) -> str:
    return (
        f"make it private (chmod -R go-w {directory}, owned by you) or sign entries "
        "(AOTCACHE_SIGNING_KEY, the same key in every process that shares it)"
    )
