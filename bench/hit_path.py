"""The hit path of a real model: aotcache vs torch's own AOTAutograd + FX graph caches, each in fresh processes.

    .venv/bin/python bench/hit_path.py [--reps 5] [--out bench/results/hit_path.json]

Model: the demo's GPT-style transformer (python/aotcache/demo_model.py, 2 layers, dim 128): a training step
(forward, loss, backward) and an inference call, two graphs. Per side: one cold process fills its cache, then
`--reps` warm processes, alternating sides; medians. Sides:
- aotcache: backend "aotcache", AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR fresh temporary directories.
- torch: backend "inductor" with TORCHINDUCTOR_FX_GRAPH_CACHE=1, TORCHINDUCTOR_AUTOGRAD_CACHE=1 and a fresh
  TORCHINDUCTOR_CACHE_DIR (torch's local caches on).
Measured in each process: time to first results (model built and compiled + train step + inference, after imports),
and the backend portion: time spent inside the backend function Dynamo calls (graph in, callable out), which on a
hit is the cache's key computation, lookup and load. For aotcache also its own load_seconds counter (payload
deserialization). A warm process that does not hit both graphs is reported as an error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker(side: str) -> None:
    t0 = time.perf_counter()
    import torch
    import torch.nn.functional as F
    from torch._dynamo.backends.registry import lookup_backend
    from torch._dynamo.utils import counters

    import aotcache
    from aotcache.demo_model import make_model_and_batch

    t_imported = time.perf_counter()
    inner = lookup_backend("aotcache" if side == "aotcache" else "inductor")
    backend_s = 0.0

    def timed(gm, example_inputs):
        nonlocal backend_s
        t = time.perf_counter()
        try:
            return inner(gm, example_inputs)
        finally:
            backend_s += time.perf_counter() - t

    torch.use_deterministic_algorithms(True)
    model, idx, targets = make_model_and_batch()
    compiled = torch.compile(model, backend=timed)
    logits = compiled(idx)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    model.eval()
    with torch.no_grad():
        compiled(idx)
    t_done = time.perf_counter()
    stats = aotcache.stats()
    result = {
        "import_s": t_imported - t0,
        "first_result_s": t_done - t_imported,
        "backend_s": backend_s,
        "aotcache_hits": stats["hits"],
        "aotcache_load_s": stats["load_seconds"],
        "torch_autograd_cache_hits": counters["aot_autograd"].get("autograd_cache_hit", 0),
        "torch_fx_graph_cache_hits": counters["inductor"].get("fxgraph_cache_hit", 0),
    }
    print("HIT_PATH_RESULT " + json.dumps(result))


def _run(side: str, env: dict[str, str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", side], env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed:\n{proc.stdout}\n{proc.stderr}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("HIT_PATH_RESULT "))
    result = json.loads(line.split(" ", 1)[1])
    result["process_s"] = time.perf_counter() - t0
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["aotcache", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "hit_path.json"))
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return 0
    work = Path(tempfile.mkdtemp(prefix="aotcache-hit-path-"))
    envs = {
        "aotcache": dict(
            os.environ, AOTCACHE_DIR=str(work / "aotcache"), TORCHINDUCTOR_CACHE_DIR=str(work / "inductor-a")
        ),
        "torch": dict(
            os.environ,
            TORCHINDUCTOR_FX_GRAPH_CACHE="1",
            TORCHINDUCTOR_AUTOGRAD_CACHE="1",
            TORCHINDUCTOR_CACHE_DIR=str(work / "inductor-t"),
        ),
    }
    runs: dict[str, dict] = {side: {"cold": None, "warm": []} for side in envs}
    for side, env in envs.items():
        print(f"{side}: cold process ...", flush=True)
        runs[side]["cold"] = _run(side, env)
    for rep in range(args.reps):
        for side in envs if rep % 2 == 0 else reversed(list(envs)):
            r = _run(side, envs[side])
            hit = r["aotcache_hits"] == 2 if side == "aotcache" else r["torch_autograd_cache_hits"] == 2
            if not hit:
                raise SystemExit(f"{side} warm process did not hit both graphs: {r}")
            runs[side]["warm"].append(r)
            print(f"{side}: warm {rep + 1}: first result {r['first_result_s']:.3f}s backend {r['backend_s']:.3f}s")
    summary = {}
    for side, r in runs.items():
        summary[side] = {
            "cold_first_result_s": r["cold"]["first_result_s"],
            "cold_backend_s": r["cold"]["backend_s"],
            **{
                f"warm_{k}_median": statistics.median(w[k] for w in r["warm"])
                for k in ("first_result_s", "backend_s", "process_s", "import_s", "aotcache_load_s")
            },
        }
    out = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}",
        "python": platform.python_version(),
        "reps": args.reps,
        "summary": summary,
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
