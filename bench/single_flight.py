"""Compile once, measured: N processes that start compiling the same model at the same moment on a fresh cache,
with compile-once (the default) and without it (AOTCACHE_COMPILE_WAIT=0), side by side.

    .venv/bin/python bench/single_flight.py [--models mlp,gpt_block] [--procs 4,8] [--reps 2]
                                            [--out bench/results/single_flight]

Each batch: N bench/worker.py processes (backend aotcache) with one fresh cache directory and one fresh Inductor
directory (one machine), lined up by a barrier after their imports, so their compiles overlap. Reported per batch:
compiles (misses) and hits over the N processes, the slowest and the median time to first result (from the
barrier's release), and the CPU seconds of all N processes and their compile workers. On this 2-core machine N
processes share two cores, so wall times mostly show CPU contention; the CPU total is what a cluster pays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ROOT, _clean_env, machine_info  # noqa: E402


def run_batch(model: str, procs: int, once: bool, work: Path) -> dict[str, Any]:
    batch = Path(tempfile.mkdtemp(prefix=f"{model}-{procs}-{'once' if once else 'off'}-", dir=work))
    env = _clean_env()
    env.update(
        {
            "AOTCACHE_DIR": str(batch / "aotcache"),
            "TORCHINDUCTOR_CACHE_DIR": str(batch / "inductor"),
            "AOTCACHE_COMPILE_WAIT": "600" if once else "0",
        }
    )
    outs = [batch / f"w{i}.json" for i in range(procs)]
    barrier = f"{batch / 'barrier'}:{procs}"
    t0 = time.monotonic()
    running = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "worker.py"), model, "aotcache", str(out), "--torch-caches-off"]
            + ["--barrier", barrier, "--deterministic"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    for p in running:
        _, err = p.communicate(timeout=1200)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed ({p.returncode}): {err[-2000:]}")
    wall = time.monotonic() - t0
    results = [json.loads(out.read_text()) for out in outs]
    first = [r["first_result_s"] for r in results]
    stats = [r["aotcache_stats"] for r in results]
    return {
        "model": model,
        "procs": procs,
        "mode": "compile once" if once else "off (AOTCACHE_COMPILE_WAIT=0)",
        "compiles": sum(s["misses"] for s in stats),
        "hits": sum(s["hits"] for s in stats),
        "waited": sum(s["wait"].get("waited", 0) for s in stats),
        "first_result_max_s": max(first),
        "first_result_median_s": statistics.median(first),
        "cpu_s": sum(r["cpu_s"] + r["children_cpu_s"] for r in results),
        "batch_wall_s": wall,
        "checksums_equal": len({r["output_checksum"]["sha256"] for r in results}) == 1,
        "loadavg_after": os.getloadavg(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Compile once: N processes compiling the same model at once",
        "",
        f"Run {report['date']}, `{report['command']}`, {report['machine'].get('cpu_model', '')}, "
        f"{report['machine'].get('nproc', '')} cores. Times in seconds; first result counted from the barrier.",
        "",
        "| model | N | mode | compiles | hits | waited | first result, slowest | median | CPU s, all "
        "| CPU ratio once/off | outputs equal |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = report["batches"]
    for r in rows:
        off = next(
            (o for o in rows if o["model"] == r["model"] and o["procs"] == r["procs"] and o["mode"].startswith("off")),
            None,
        )
        ratio = f"{r['cpu_s'] / off['cpu_s']:.2f}" if off and r["mode"] == "compile once" else ""
        lines.append(
            f"| {r['model']} | {r['procs']} | {r['mode']} | {r['compiles']} | {r['hits']} | {r['waited']} "
            f"| {r['first_result_max_s']:.1f} | {r['first_result_median_s']:.1f} | {r['cpu_s']:.0f} | {ratio} "
            f"| {'yes' if r['checksums_equal'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,gpt_block")
    parser.add_argument("--procs", default="4,8")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "single_flight"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aotcache-single-flight-"))
    batches = []
    for model in args.models.split(","):
        for procs in (int(n) for n in args.procs.split(",")):
            for rep in range(args.reps):
                for once in (True, False) if rep % 2 == 0 else (False, True):  # alternate against load drift
                    batches.append(run_batch(model, procs, once, work))
                    b = batches[-1]
                    print(
                        f"{model} N={procs} {b['mode']}: {b['compiles']} compiles, {b['hits']} hits, "
                        f"slowest {b['first_result_max_s']:.1f}s, CPU {b['cpu_s']:.0f}s",
                        flush=True,
                    )
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": ".venv/bin/python bench/single_flight.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(),
        "batches": batches,
    }
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
