"""One fresh process running frame_cases.py cases under one backend (FRAME_CASES_BACKEND, set by the caller).

usage: frames_worker.py OUT_DIR [--variant] [--fault key|load|record] CASE...

Writes OUT_DIR/<case>.pt and prints one line per case, `FRAME {json}`: the case's delta of aotcache.stats() (graph
hits/misses/bypasses and the `frames` counters), how many graphs Dynamo compiled (0 when every frame of the case
was served by the frame cache) and the exception if any.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import frame_cases
import torch
from torch._dynamo.utils import counters

from stats_delta import delta


def _inject(phase: str) -> None:
    """Makes the frame cache's `phase` raise on every frame (--fault PHASE): Dynamo must trace as if frames were
    off, the results stay right, and the fault is counted frames.internal_error.<phase>."""
    from aotcache.frames import frame_key, record, serve

    owner, target = {"key": (frame_key, "frame_of"), "load": (serve, "load"), "record": (record, "record")}[phase]

    def broken(*args, **kwargs):
        raise RuntimeError(f"injected fault in the frame cache's {phase}")

    setattr(owner, target, broken)


def main() -> int:
    out_dir, args = sys.argv[1], sys.argv[2:]
    variant = "--variant" in args
    if "--fault" in args:
        i = args.index("--fault")
        _inject(args[i + 1])
        args = args[:i] + args[i + 2 :]
    names = [a for a in args if not a.startswith("--")]
    stats = None
    if frame_cases.CASE_BACKEND == "aotcache":
        import aotcache

        stats = aotcache.stats
    torch.use_deterministic_algorithms(True)
    for name in names:
        torch._dynamo.reset()
        before = stats() if stats else {}
        graphs_before = int(counters["stats"]["unique_graphs"])
        row = {"case": name}
        try:
            result = frame_cases.CASES[name](variant)
            torch.save(result, os.path.join(out_dir, f"{name}.pt"))
        except Exception as e:  # recorded: the test fails the case
            row["exception"] = f"{type(e).__name__}: {e}"[:2000]
            row["traceback"] = traceback.format_exc()[-3000:]
        row["graphs"] = int(counters["stats"]["unique_graphs"]) - graphs_before
        row["stats"] = delta(stats(), before) if stats else {}
        print("FRAME " + json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
