"""Warm start of real clients against torch's own warm caches: PyTorch Lightning's Trainer with a compiled
LightningModule, and PEFT LoRA on a small Llama (tests/python/support/clients_worker.py), measured as the zoo measures:
each client's time from the start of its run (imports done) to its results, in fresh processes.

    .venv/bin/python bench/clients.py [--reps 3] [--out-dir bench/results]

Systems: torch's caches (backend="inductor" with the FX graph and AOTAutograd caches on, as by default; warm = a
second process on the same cache directories) and aotcache (warm = a process on the entries of a cold one). One cold
process per system fills its cache; then `--reps` warm processes per system, alternating. Results must be equal
across every process; every aotcache warm process must serve its frames (no frame traced, no graph compiled).
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

import torch

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "python" / "support" / "clients_worker.py"


def run(backend: str, tmp: Path, label: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOTCACHE_", "TORCHINDUCTOR_"))}
    env.update(
        AOTCACHE_DIR=str(tmp / "aotcache"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{backend}"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(WORKER.parent),
    )
    out = tmp / f"{label}.pt"
    done = subprocess.run(
        [sys.executable, str(WORKER), backend, str(out)], env=env, capture_output=True, text=True, timeout=1200
    )
    if done.returncode != 0:
        raise RuntimeError(f"{label}: exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    lines = done.stdout.splitlines()
    times = json.loads(next(ln for ln in lines if ln.startswith("TIMES "))[6:])
    stats = next((json.loads(ln[6:]) for ln in lines if ln.startswith("STATS ")), None)
    return {"times": times, "stats": stats, "results": torch.load(out)}


def _same(a: dict, b: dict) -> bool:
    return all(a[c].keys() == b[c].keys() and all(torch.equal(a[c][k], b[c][k]) for k in a[c]) for c in a)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    started, load = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="aotcache-clients-") as tmp_name:
        tmp = Path(tmp_name)
        runs = {"torch_cold": [run("inductor-cached", tmp, "torch_cold")], "aotcache_cold": []}
        runs["aotcache_cold"].append(run("aotcache", tmp, "aotcache_cold"))
        runs["torch_warm"], runs["aotcache_warm"] = [], []
        for rep in range(args.reps):
            order = [("inductor-cached", "torch_warm"), ("aotcache", "aotcache_warm")]
            for backend, label in order if rep % 2 == 0 else order[::-1]:
                runs[label].append(run(backend, tmp, f"{label}{rep}"))
    reference = runs["torch_cold"][0]["results"]
    for label, rows in runs.items():
        for row in rows:
            if not _same(row["results"], reference):
                raise RuntimeError(f"{label}: results differ from torch's cold run")
    for row in runs["aotcache_warm"]:
        frames = row["stats"]["frames"]
        if frames.get("misses") or not frames.get("hits") or row["stats"]["misses"]:
            raise RuntimeError(f"an aotcache warm process traced or compiled: {row['stats']}")
    clients = sorted(reference)
    med = {label: {c: statistics.median(r["times"][c] for r in rows) for c in clients} for label, rows in runs.items()}
    meta = (
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(started))}, {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}, torch {torch.__version__}; load {load:.1f} at "
        f"start, {os.getloadavg()[0]:.1f} at end. Command: `bench/clients.py --reps {args.reps}`"
    )
    lines = [
        meta,
        "",
        "Seconds from a client's start (imports done) to its results, median of processes; results equal in every "
        "process; aotcache warm: every frame served, no graph compiled.",
        "",
        "| client | torch cold | torch warm (its caches) | aotcache cold | aotcache warm | "
        "aotcache warm / torch warm |",
        "|---|---|---|---|---|---|",
    ]
    for c in clients:
        lines.append(
            f"| {c} | {med['torch_cold'][c]:.2f} | {med['torch_warm'][c]:.2f} | {med['aotcache_cold'][c]:.2f} | "
            f"{med['aotcache_warm'][c]:.2f} | {med['aotcache_warm'][c] / med['torch_warm'][c]:.2f} |"
        )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "clients.md").write_text("\n".join(lines) + "\n")
    (out / "clients.json").write_text(
        json.dumps(
            {"meta": meta, "median_seconds": med, "times": {k: [r["times"] for r in v] for k, v in runs.items()}},
            indent=1,
        )
        + "\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
