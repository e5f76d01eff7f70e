"""A test hook (test_frames.py, the zoo and adversarial suites): with AOTCACHE_FRAMES_GUARD_LOG set, a JSON line per
guard set built, fresh ("traced") or from a frame entry ("loaded"), with the code digest and the sorted (source,
guard kind) pairs, a content guard under the kind it replaced. Comparing both for the same code shows the loaded
guards are a fresh trace's."""

from __future__ import annotations

import functools
import json
import logging
import os
import types
from typing import Any

from aotcache.frames import (
    content,
    guards,
)
from aotcache.storage import private_files

log = logging.getLogger("aotcache")


# A test hook (test_frames.py, the zoo and adversarial suites): a JSON line per guard set built, fresh ("traced") or
# from a frame entry ("loaded"), with the code digest and the sorted (source, guard kind) pairs, a content guard
# under the kind it replaced. Comparing both for the same code shows the loaded guards are a fresh trace's.
GUARD_LOG = os.environ.get("AOTCACHE_FRAMES_GUARD_LOG", "")


def log_guards(how: str, code: types.CodeType, guard_set: Any) -> None:
    try:
        pairs = set()
        for g in guard_set:
            fn = g.create_fn
            if isinstance(fn, functools.partial) and fn.func in (
                guards.aotcache_storage_partition,
                guards.aotcache_meshes,
            ):
                continue  # ours, beyond Dynamo's: a fresh trace has none
            if isinstance(fn, functools.partial) and fn.func is guards.aotcache_content_match:
                kind = fn.args[0]
            elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_length_match:
                kind = "EMPTY_NN_MODULE_HOOKS_DICT"
            elif isinstance(fn, functools.partial) and fn.func is guards.aotcache_empty_hooks:
                pairs.update((g.originating_source.name + "." + m, "EMPTY_NN_MODULE_HOOKS_DICT") for m in fn.args[0])
                continue
            else:
                kind = g.create_fn_name()
            pairs.add((g.name, kind))
        line = {"how": how, "code": content.code_digest(code), "name": code.co_qualname, "guards": sorted(pairs)}
        line["pid"] = os.getpid()
        with private_files.open_append(GUARD_LOG) as f:
            f.write(json.dumps(line) + "\n")
    except Exception:
        log.debug("cannot log the guards of %s", code.co_qualname, exc_info=True)
