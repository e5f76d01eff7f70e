"""One fresh process running many program pairs (frame_pairs.py) as one variant under one backend.

usage: frame_pairs_worker.py VARIANT BACKEND PAIRS_DIR OUT [NAME...]

VARIANT is A or B (exported as AOTC_PAIR_VARIANT before each pair's module is imported); BACKEND is `aotcache` or
`inductor` (torch's FX graph and AOTAutograd caches off: every graph really compiled, the reference). PAIRS_DIR holds
the modules and `pairs.json` ([{name, module}]); without NAMEs every pair runs. Each pair: its module imported,
setup() applied, run(backend) called, the undo applied, torch._dynamo.reset(); an exception is caught and recorded.
Writes OUT (torch.save of {name: {"out": {..}, "error": str|None, "counters": {..}, "warnings": [..],
"frames_compiled": int}}).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import traceback
import warnings

import torch
from torch._dynamo.utils import counters as dynamo_counters

from stats_delta import delta


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"aotcache {record.levelname}: {record.getMessage()}")


def main() -> int:
    variant, backend, pairs_dir, out = sys.argv[1:5]
    names = set(sys.argv[5:])
    sys.path.insert(0, pairs_dir)
    with open(os.path.join(pairs_dir, "pairs.json")) as f:
        pairs = [p for p in json.load(f) if not names or p["name"] in names]
    stats = None
    if backend == "aotcache":
        import aotcache

        stats = aotcache.stats
        if os.environ.get("AOTC_PAIR_DISABLE_READ_SET") == "1":
            # The verifier's own test: without the read set's check a stale frame is served, and the verifier
            # must find it (and run Dynamo's result instead).
            from aotcache.frames import process_state, read_set

            read_set.changed = lambda *args: None
            read_set.facts_changed = lambda *args: None
            process_state.facts_changed = lambda *args: None
    else:
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    handler = _Warnings()
    logging.getLogger("aotcache").addHandler(handler)
    results = {}
    for pair in pairs:
        os.environ["AOTC_PAIR_VARIANT"] = variant
        torch._dynamo.reset()
        dynamo_counters.clear()
        handler.lines = []
        before = stats() if stats else {}
        row: dict = {"out": {}, "error": None, "warnings": []}
        undo = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                module = importlib.import_module(pair["module"])
                undo = module.setup()
                got = module.run(backend)
                row["out"] = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in got.items()}
            except BaseException as e:  # noqa: BLE001 - recorded per pair, the next one runs
                row["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            finally:
                if undo is not None:
                    try:
                        undo()
                    except Exception as e:
                        row["error"] = (row["error"] or "") + f"undo failed: {e!r}"
        row["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught} | set(handler.lines))
        row["counters"] = delta(stats(), before) if stats else {}
        row["frames_compiled"] = int(dynamo_counters["stats"]["unique_graphs"])
        results[pair["name"]] = row
        print(f"PAIR {pair['name']} {'error' if row['error'] else 'ok'}", flush=True)
    torch._dynamo.reset()
    torch.save(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
