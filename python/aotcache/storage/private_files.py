"""Folders and files the cache's Python side creates, private whatever the umask (0700 / 0600).

The C++ store makes its own folders 0700 and files 0600 (src/env/posix_file_system.cc); what Python writes beside
it (the vector-ISA probe memo, the kernel header stubs, the guard log) goes through here, so that no umask (002 on
distributions with a private group per user, 000 in some containers) leaves a folder that `storage/trust.py` must
then refuse. A umask only removes bits, so creating with these modes is private under any umask.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

DIR_MODE = 0o700
FILE_MODE = 0o600


def makedirs(path: str) -> None:
    """Creates `path` and every missing folder above it with mode 0700 (os.makedirs gives the mode to the last one
    only; the others get 0777 less the umask). Existing folders are left as they are."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise


def write_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` through a private temporary file renamed over it: a reader sees the old file or the
    new one, never a part, and the file is 0600."""
    folder = os.path.dirname(path)
    makedirs(folder)
    fd, tmp = tempfile.mkstemp(prefix=".aotcache-", suffix=".tmp", dir=folder)  # mkstemp: 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_append(path: str):
    """`path` opened for appending text, created 0600 when missing."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE), "a")
