"""Training jobs as people run them, side by side with torch's caches: DDP under torch's defaults on 2 torchrun
ranks, the Hugging Face Trainer with `torch_compile=True`, and a nanoGPT-style script (compiled model, compiled AdamW
step with a cosine schedule, generate). Each mode is a fresh job; the measure is the time from the start of the
training loop to the end of its first step (for DDP, the slower rank), which is what compiling delays.

    .venv/bin/python bench/jobs.py                        # every job, 2 repetitions (part of make bench-zoo)
    .venv/bin/python bench/jobs.py --jobs ddp2 --reps 1

Modes per job and repetition (the two systems alternating which goes first):
  torch_cold     backend inductor, torch's FX graph + AOTAutograd caches on, empty TORCHINDUCTOR_CACHE_DIR
  torch_warm     the same on the directory torch_cold left
  aotcache_cold  aotcache (DDP: backend="aotcache"; the Trainer and nanoGPT: AOTCACHE_ENABLE=1, the code unchanged),
                 empty AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR, frames on
  aotcache_warm  frames off (AOTCACHE_FRAMES=0), on the directories aotcache_cold left
  frames_warm    frames on, the same directories
Writes OUT_DIR/jobs.json and jobs.md (default OUT_DIR: bench/results).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TESTS = ROOT / "tests" / "python" / "support"  # the workers and case tables the tests run
sys.path.insert(0, str(BENCH))

MODES = ("torch_cold", "torch_warm", "aotcache_cold", "aotcache_warm", "frames_warm")
WARM = ("torch_warm", "aotcache_warm", "frames_warm")
PHASES = {"torch": ("torch_cold", "torch_warm"), "aotcache": ("aotcache_cold", "aotcache_warm", "frames_warm")}
JOBS = {
    "ddp2": "DistributedDataParallel, 2 torchrun ranks (gloo), optimize_ddp on: a 4-layer residual MLP + LayerNorm "
    "split into 4+ pieces, SGD, 3 steps (tests/python/support/ddp_worker.py)",
    "trainer": "Hugging Face Trainer, torch_compile=True, a 2-layer GPT-2 (random weights), 3 steps "
    "(tests/python/support/enable_worker.py trainer)",
    "nanogpt": "nanoGPT-style script: compiled GPT (2 layers), compiled AdamW step, cosine LR as a Python float, "
    "6 steps then generate (tests/python/support/nanogpt_train.py)",
}


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("TORCHINDUCTOR_", "AOTCACHE_", "TORCH_COMPILE_")):
            del env[name]
    env.update(PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", PYTHONPATH=str(TESTS))
    return env


def _command(job: str, system: str, out: Path) -> list[str]:
    py = sys.executable
    if job == "ddp2":
        backend = "aotcache" if system == "aotcache" else "inductor-cached"
        return [
            py,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(TESTS / "ddp_worker.py"),
            backend,
            str(out),
            "1.0",
        ]
    if job == "trainer":
        return [py, str(TESTS / "enable_worker.py"), "trainer", str(out)]
    return [py, str(TESTS / "nanogpt_train.py"), str(out)]


def _outputs(job: str, out: Path) -> list[Path]:
    return [Path(f"{out}.{rank}") for rank in (0, 1)] if job == "ddp2" else [out]


def run_mode(job: str, mode: str, dirs: dict[str, str], out: Path, timeout_s: float) -> dict[str, Any]:
    system = "torch" if mode.startswith("torch") else "aotcache"
    env = _clean_env()
    if system == "aotcache":
        env.update(
            TORCHINDUCTOR_CACHE_DIR=dirs["aotcache_inductor"],
            AOTCACHE_DIR=dirs["aotcache"],
            AOTCACHE_FRAMES="0" if mode == "aotcache_warm" else "1",
        )
        if job != "ddp2":
            env["AOTCACHE_ENABLE"] = "1"
    else:
        env["TORCHINDUCTOR_CACHE_DIR"] = dirs["torch_inductor"]
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(_command(job, system, out), env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise RuntimeError(f"{job} {mode} exited {proc.returncode}")
    import torch

    results = [torch.load(p) for p in _outputs(job, out)]
    row: dict[str, Any] = {
        "job": job,
        "mode": mode,
        "process_wall_s": wall,
        "first_step_s": max(r["timing"]["first_step_s"] for r in results),
        "steps_s": max(r["timing"]["steps_s"] for r in results),
        "outs": [r["out"] for r in results],
    }
    if system == "aotcache":
        stats = [r["stats"] for r in results]
        row["counters"] = {k: sum(s[k] for s in stats) for k in ("hits", "misses", "bypasses", "errors")} | {
            "frame_hits": sum(s.get("frames", {}).get("hits", 0) for s in stats)
        }
    return row


def _equal(a: list[dict], b: list[dict]) -> bool:
    import torch

    return all(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b))


def measure_job(job: str, reps: int, work: Path, timeout_s: float) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        d = work / f"{job}-{rep}"
        dirs = {k: str(d / k) for k in ("torch_inductor", "aotcache", "aotcache_inductor")}
        systems = ("torch", "aotcache") if rep % 2 == 0 else ("aotcache", "torch")
        rows = []
        for system in systems:
            for mode in PHASES[system]:
                r = run_mode(job, mode, dirs, d / mode / "out.pt", timeout_s)
                r["rep"] = rep
                rows.append(r)
                c = r.get("counters")
                print(
                    f"  {job:<8} {mode:<14} rep {rep}: first step {r['first_step_s']:7.2f}s "
                    f"(process {r['process_wall_s']:6.1f}s)"
                    + (
                        f" aotcache h/m/b {c['hits']}/{c['misses']}/{c['bypasses']} frames {c['frame_hits']}"
                        if c
                        else ""
                    ),
                    flush=True,
                )
        equal = all(_equal(r["outs"], rows[0]["outs"]) for r in rows)
        for r in rows:
            r["bitwise_equal_all_modes"] = equal
            del r["outs"]
        runs += rows
        shutil.rmtree(d, ignore_errors=True)
    return runs


def summarize(job: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_mode = {m: [r for r in runs if r["mode"] == m] for m in MODES}
    med = {m: statistics.median(r["first_step_s"] for r in rs) for m, rs in by_mode.items()}
    return {
        "job": job,
        "description": JOBS[job],
        "first_step_s": {m: [r["first_step_s"] for r in rs] for m, rs in by_mode.items()},
        "median_first_step_s": med,
        "ratios": {
            "warm_aotcache_over_warm_torch": med["aotcache_warm"] / med["torch_warm"],
            "warm_frames_over_warm_torch": med["frames_warm"] / med["torch_warm"],
            "cold_aotcache_over_warm_frames": med["aotcache_cold"] / med["frames_warm"],
        },
        "warm_counters": {m: [r["counters"] for r in by_mode[m]] for m in ("aotcache_warm", "frames_warm")},
        "cold_counters": [r["counters"] for r in by_mode["aotcache_cold"]],
        "bitwise_equal_all_modes": all(r["bitwise_equal_all_modes"] for r in runs),
    }


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"{m['date']}, {m['nproc']} cores ({m['cpu_model']}), torch {m['torch']}, aotcache {m['aotcache']}; load "
        f"average {report['loadavg'][0]:.1f} at start, {report['loadavg'][1]:.1f} at end. Command: "
        f"`{report['command']}` ({report['wall_s'] / 60:.1f} min).",
        "",
        "Seconds from the start of the training loop to the end of its first step, in a fresh job (DDP: the slower "
        "rank), median of the repetitions; ratios of medians. Warm counters: aotcache hits/misses/bypasses summed "
        "over ranks, and frames served.",
        "",
        "| job | n | torch cold | torch warm | aotcache cold | aotcache warm | aotcache warm, frames on | warm aot / "
        "warm torch | warm frames / warm torch | cold aot / warm frames | warm h/m/b (aot; frames) | bitwise equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["jobs"]:
        med, r = s["median_first_step_s"], s["ratios"]
        counters = "; ".join(
            ", ".join(f"{c['hits']}/{c['misses']}/{c['bypasses']}" for c in s["warm_counters"][mode])
            + (
                f" ({', '.join(str(c['frame_hits']) for c in s['warm_counters'][mode])} frames)"
                if mode == "frames_warm"
                else ""
            )
            for mode in ("aotcache_warm", "frames_warm")
        )
        lines.append(
            f"| {s['job']} | {len(s['first_step_s']['torch_warm'])} "
            + "".join(f"| {med[mode]:.2f} " for mode in MODES)
            + f"| {r['warm_aotcache_over_warm_torch']:.2f}x | {r['warm_frames_over_warm_torch']:.2f}x "
            f"| {r['cold_aotcache_over_warm_frames']:.1f}x | {counters} "
            f"| {'yes' if s['bitwise_equal_all_modes'] else 'NO'} |"
        )
    for job, err in report.get("failures", {}).items():
        lines.append(f"| {job} | failed: {err[:300]} |")
    lines += ["", "Jobs:", ""] + [f"- {j}: {JOBS[j]}" for j in report["job_names"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated (default: {', '.join(JOBS)})")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out-dir", default=str(BENCH / "results"))
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per job")
    args = parser.parse_args()
    jobs = args.jobs.split(",")
    unknown = [j for j in jobs if j not in JOBS]
    if unknown:
        parser.error(f"unknown jobs {unknown}; known: {', '.join(JOBS)}")
    from run import machine_info

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="aotcache-jobs-bench-"))
    summaries, all_runs, failures = [], [], {}
    try:
        for job in jobs:
            print(f"{job}: {JOBS[job]}; {args.reps} reps", flush=True)
            try:
                runs = measure_job(job, args.reps, work, args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # reported; the other jobs still run
                print(f"  {job} FAILED: {e}", flush=True)
                failures[job] = str(e)
                continue
            all_runs += runs
            summaries.append(summarize(job, runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "machine": machine_info(),
        "command": " ".join(["bench/jobs.py", *sys.argv[1:]]),
        "wall_s": time.perf_counter() - t0,
        "loadavg": [load_start, os.getloadavg()[0]],
        "reps": args.reps,
        "job_names": jobs,
        "jobs": summaries,
        "failures": failures,
        "runs": all_runs,
    }
    (out_dir / "jobs.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (out_dir / "jobs.md").write_text(text)
    print()
    print(text)
    print(f"wrote {out_dir / 'jobs.json'}, {out_dir / 'jobs.md'} in {report['wall_s'] / 60:.1f} min")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
