"""Who may have written a cache directory, the way ssh judges a loose `~/.ssh`.

An entry carries code a hit runs (a frame's bytecode, the graphs' generated Python, kernel libraries). Without a
signing key, the only thing that vouches for an entry is who could have written it: a directory that another user
owns, or that group or others may write (a team's shared directory, a path under /tmp), lets that user plant code
in every process that loads from it. Such a directory is not used unless entries are signed
(`AOTCACHE_SIGNING_KEY`: every entry's HMAC is checked before any of it is decoded).

The directory and its subdirectories (one level: the store's own folders and the entries' shard folders below
them) are checked once per process and store; root's own directories are trusted as the user's.
"""

from __future__ import annotations

import os
import stat


def untrusted_reason(directory: str) -> str | None:
    """None when only this user (or root) can have written `directory` and the folders in it; else why not."""
    me = os.geteuid()
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
    except FileNotFoundError:
        return None  # nothing written yet: the store creates it private
    except OSError as e:
        return f"cannot inspect {directory}: {e}"
    return None


def advice(directory: str) -> str:
    return (
        f"make it private (chmod -R go-w {directory}, owned by you) or sign entries "
        "(AOTCACHE_SIGNING_KEY, the same key in every process that shares it)"
    )
