"""Per-call cost of a compiled model after its first call: a frame aotcache served against the same frame traced.

    .venv/bin/python bench/call_overhead.py [--blocks 25,100,400] [--reps 3] [--calls 2000] [--out-dir bench/results]

A warm start is not the only place a served frame can cost: its guards run on every call. Dynamo's own guards of a
traced frame check identities (in one process), while a served frame checks what aotcache added for soundness
across processes: every module's hook dicts still empty (Dynamo skips them by default), the storage partition of
the graph's inputs (which inputs share a storage), content guards in place of identity guards. This measures what
they cost per call, side by side in fresh processes: eager (no compile), backend="inductor" (a traced frame),
aotcache's cold process (a traced frame, recorded) and its warm process (the frame served from the entry).

Model: `--blocks` blocks of Linear(4, 4) + ReLU in a Sequential, inputs of 2x4: per call almost nothing but
overhead, 2 parameters and 3 modules per block (the cost of guards grows with both). Per process: 200 calls to
warm up, then `--calls` calls timed in 5 batches, the median batch's per-call time. Medians over `--reps`
processes per system, systems alternating.
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

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("eager", "inductor", "aotcache_cold", "aotcache_warm")


def _worker(system: str, blocks: int, calls: int) -> None:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(blocks)])
    if system == "eager":
        fn = model
    else:
        if system.startswith("aotcache"):
            import aotcache  # noqa: F401  (registers the backend)
        fn = torch.compile(model, backend="aotcache" if system.startswith("aotcache") else "inductor")
    x = torch.randn(2, 4)
    batches = []
    with torch.no_grad():
        out = fn(x)
        for _ in range(200):
            fn(x)
        per_batch = max(1, calls // 5)
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(per_batch):
                fn(x)
            batches.append((time.perf_counter() - t) / per_batch)
    row = {"system": system, "blocks": blocks, "per_call_us": 1e6 * statistics.median(batches)}
    if system.startswith("aotcache"):
        import aotcache

        frames = aotcache.stats().get("frames", {})
        row["frames_served"] = frames.get("hits", 0)
    row["checksum"] = float(out.double().sum())
    print("ROW " + json.dumps(row), flush=True)


def run(system: str, blocks: int, calls: int, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOTCACHE_", "TORCHINDUCTOR_"))}
    env.update(AOTCACHE_DIR=str(cache / "aotcache"), TORCHINDUCTOR_CACHE_DIR=str(cache / f"{system}-inductor"))
    if system.startswith("aotcache"):
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "aotcache-inductor")
    done = subprocess.run(
        [sys.executable, __file__, "--worker", system, str(blocks), str(calls)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    rows = [json.loads(ln[4:]) for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
    if done.returncode != 0 or len(rows) != 1:
        raise RuntimeError(f"{system} x{blocks}: exit {done.returncode}: {done.stderr[-2000:]}")
    return rows[0]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", default="25,100,400")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    started = time.time()
    load = os.getloadavg()[0]
    table = []
    for blocks in [int(b) for b in args.blocks.split(",")]:
        with tempfile.TemporaryDirectory(prefix="aotcache-call-overhead-") as tmp:
            runs: dict[str, list[dict]] = {s: [] for s in SYSTEMS}
            runs["aotcache_cold"].append(run("aotcache_cold", blocks, args.calls, Path(tmp)))  # fills the cache
            for rep in range(args.reps):
                order = ["eager", "inductor", "aotcache_warm"]
                for system in order if rep % 2 == 0 else order[::-1]:
                    runs[system].append(run(system, blocks, args.calls, Path(tmp)))
            if any(r.get("frames_served", 0) < 1 for r in runs["aotcache_warm"]):
                raise RuntimeError(
                    f"x{blocks}: a warm aotcache process did not serve its frame: {runs['aotcache_warm']}"
                )
            sums = {r["checksum"] for rs in runs.values() for r in rs}
            if len(sums) != 1:
                raise RuntimeError(f"x{blocks}: results differ across systems: {sums}")
            med = {s: statistics.median(r["per_call_us"] for r in rs) for s, rs in runs.items()}
            table.append({"blocks": blocks, "per_call_us": med, "runs": runs})
            print(f"blocks {blocks}: " + ", ".join(f"{s} {v:.0f} us" for s, v in med.items()), flush=True)
    meta = (
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(started))}, {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}, torch {_torch_version()}; load {load:.1f} at "
        f"start, {os.getloadavg()[0]:.1f} at end. Command: `bench/call_overhead.py --blocks {args.blocks} "
        f"--reps {args.reps} --calls {args.calls}`"
    )
    lines = [
        meta,
        "",
        "Per-call time after the first call (us, median batch, median of processes); aotcache cold = the frame traced "
        "in that process, warm = served from the entry. Results equal across systems.",
        "",
        "| blocks (params) | eager | inductor (traced) | aotcache cold (traced) | aotcache warm (served) | "
        "served - traced inductor |",
        "|---|---|---|---|---|---|",
    ]
    for row in table:
        m = row["per_call_us"]
        lines.append(
            f"| {row['blocks']} ({2 * row['blocks']}) | {m['eager']:.0f} | {m['inductor']:.0f} | "
            f"{m['aotcache_cold']:.0f} | {m['aotcache_warm']:.0f} | {m['aotcache_warm'] - m['inductor']:+.0f} |"
        )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "call_overhead.md").write_text("\n".join(lines) + "\n")
    (out / "call_overhead.json").write_text(json.dumps({"meta": meta, "table": table}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


def _torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


if __name__ == "__main__":
    sys.exit(main())
