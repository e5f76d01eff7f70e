"""Compiles three different small graphs with backend="aotcache" in one process and checks each result against
eager; prints one line "RESULT <json>" with aotcache.stats() and the aotcache WARNING lines. For the fault tests.

    python fault_workload.py [FAULT]

With FAULT (enospc, erofs, eacces, fsync, rename, ...), the backend's store for $AOTCACHE_DIR is replaced by one
over the fault-injecting file system (`_core.LocalStore.open_with_fault`): no mount privileges needed.
"""

from __future__ import annotations

import json
import logging
import sys

import torch

import aotcache

warnings: list[str] = []


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())


def main() -> None:
    if len(sys.argv) > 1:
        from aotcache import _core, settings
        from aotcache.storage import opened

        cfg = settings.current()
        store = _core.LocalStore.open_with_fault(cfg.cache_dir, sys.argv[1], **settings.store_options(cfg))
        opened.install(cfg, store)
    logging.getLogger("aotcache").addHandler(_Collect())
    logging.getLogger("aotcache").setLevel(logging.DEBUG)
    torch.manual_seed(0)
    fns = [lambda x: (x.sin() + 1).relu(), lambda x: x.cos() * x, lambda x: torch.tanh(x) - x.exp()]
    x = torch.randn(16, 16)
    ok = True
    for fn in fns:
        ok &= torch.allclose(torch.compile(fn, backend="aotcache")(x), fn(x), atol=1e-6)
    print("RESULT " + json.dumps({"ok": bool(ok), "stats": aotcache.stats(), "warnings": warnings}))


if __name__ == "__main__":
    main()
