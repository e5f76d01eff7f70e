"""The model zoo benchmark: Hugging Face models (tests/python/support/zoo_models.py) under torch's built-in caches and
under aotcache, cold and warm, each measurement in a fresh process (tests/python/support/zoo_worker.py).

    .venv/bin/python bench/zoo.py                               # every model, 2 repetitions (make bench-zoo)
    .venv/bin/python bench/zoo.py --models gpt2,llama --reps 1  # a subset
    .venv/bin/python bench/zoo.py --items bert:adamw,t5:generate --out-dir /tmp/zoo
    .venv/bin/python bench/zoo.py --replot bench/results/zoo.json  # redraw zoo.md and zoo.png

Items: one representative workload per model, its training step (loss + backward), plus GPT-2's greedy generate
(dynamic shapes from the growing KV cache). Per item and repetition, five processes, the two systems alternating which
goes first:
  torch_cold     backend "inductor", torch's FX graph + AOTAutograd caches on, empty TORCHINDUCTOR_CACHE_DIR
  torch_warm     the same on the directory torch_cold left
  aotcache_cold  backend "aotcache" (torch's caches off), empty AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR, frames on
                 (AOTCACHE_FRAMES=1: it records the frame entries too)
  aotcache_warm  frames off, on the directories aotcache_cold left (same machine, a second process): Dynamo traces,
                 the graphs hit
  frames_warm    frames on, the same directories: frames whose entry holds run without Dynamo's tracing
Reported: time to first result (compile + first result of the item, after the model is built; medians of the
repetitions), the warm breakdown (Dynamo's bytecode tracing, guard building and the rest of Dynamo from
torch._dynamo.utils.compilation_time_metrics; the backend call, for aotcache split into its INFO line's key, lookup
and load; the run: execution, backward, anything compiled lazily), the ratios warm-aotcache / warm-torch and
cold / warm-aotcache, the Dynamo share of each warm time, both systems' hit counters, and whether the four processes'
results are bitwise equal. Writes OUT_DIR/zoo.json, zoo.md and zoo.png (default OUT_DIR: bench/results).
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
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(BENCH))
import zoo_models  # noqa: E402  (tests/python/support/zoo_models.py)

MODES = ("torch_cold", "torch_warm", "aotcache_cold", "aotcache_warm", "frames_warm")
MODE_DOCS = {
    "torch_cold": "backend inductor, torch's FX graph + AOTAutograd caches on, empty TORCHINDUCTOR_CACHE_DIR",
    "torch_warm": "backend inductor, torch's caches on, TORCHINDUCTOR_CACHE_DIR as torch_cold left it",
    "aotcache_cold": "backend aotcache (torch's caches off), empty AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR; frames "
    "on (AOTCACHE_FRAMES=1): it also records the frame entries",
    "aotcache_warm": "backend aotcache, frames off, AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR as aotcache_cold left",
    "frames_warm": "backend aotcache, frames on (Dynamo's tracing skipped where a frame entry holds), the same dirs",
}
BACKEND = {"torch": "inductor-cached", "aotcache": "aotcache", "frames": "aotcache"}
# The modes each system runs in one repetition, in order.
PHASES = {"torch": ("torch_cold", "torch_warm"), "aotcache": ("aotcache_cold", "aotcache_warm", "frames_warm")}
DEFAULT_ITEMS = tuple(f"{m}:train" for m in zoo_models.MODELS) + ("gpt2:generate",)
# Warm breakdown parts, in plot order: (name, phases key). aotcache's backend is split into key, lookup, load and the
# rest; torch's backend is its AOTAutograd/FX cache lookup + load.
PARTS = (
    ("Dynamo: bytecode tracing", "tracing_s"),
    ("Dynamo: guards", "guards_s"),
    ("Dynamo: rest", "dynamo_other_s"),
    ("aotcache: key", "key_s"),
    ("aotcache: lookup", "lookup_s"),
    ("aotcache: load", "load_s"),
    ("frames: load", "frame_load_s"),
    ("backend (rest)", "backend_rest_s"),
    ("run (+ lazy compile)", "run_s"),
)


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("TORCHINDUCTOR_", "AOTCACHE_", "TORCH_COMPILE_")):
            del env[name]
    env.update(PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(TESTS), str(BENCH)]))
    return env


def run_worker(item: str, mode: str, dirs: dict[str, str], out: Path, timeout_s: float) -> dict[str, Any]:
    system = mode.split("_")[0]
    env = _clean_env()
    if system in ("aotcache", "frames"):
        env["TORCHINDUCTOR_CACHE_DIR"] = dirs["aotcache_inductor"]
        env["AOTCACHE_DIR"] = dirs["aotcache"]
        env["AOTCACHE_FRAMES"] = "0" if mode == "aotcache_warm" else "1"
    else:
        env["TORCHINDUCTOR_CACHE_DIR"] = dirs["torch_inductor"]
    cmd = [sys.executable, str(TESTS / "zoo_worker.py"), BACKEND[system], str(out), "--label", mode, item]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    wall = time.perf_counter() - t0
    rows = [json.loads(ln[len("ZOO ") :]) for ln in proc.stdout.splitlines() if ln.startswith("ZOO ")]
    if proc.returncode != 0 or len(rows) != 1:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise RuntimeError(f"worker {item} {mode} exited {proc.returncode}")
    row = rows[0]
    if "exception" in row:
        raise RuntimeError(f"{item} {mode}: {row['exception'][:500]}")
    row.update(mode=mode, process_wall_s=wall, loadavg_1m_at_start=load)
    return row


def measure_item(item: str, reps: int, work: Path, timeout_s: float) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    name = item.replace(":", "-")
    for rep in range(reps):
        d = work / f"{name}-{rep}"
        dirs = {
            "torch_inductor": str(d / "torch-inductor"),
            "aotcache": str(d / "aotcache"),
            "aotcache_inductor": str(d / "aotcache-inductor"),
        }
        systems = ("torch", "aotcache") if rep % 2 == 0 else ("aotcache", "torch")  # alternate who goes first
        for system in systems:
            for mode in PHASES[system]:
                r = run_worker(item, mode, dirs, d / "out", timeout_s)
                r["rep"] = rep
                runs.append(r)
                print(
                    f"  {item:<14} {mode:<14} rep {rep}: first result {r['first_result_s']:7.2f}s "
                    f"(process {r['process_wall_s']:6.1f}s) {hit_summary(r)}",
                    flush=True,
                )
        equal = bitwise_equal(d / "out", item)
        for r in runs[-len(MODES) :]:
            r["bitwise_equal_all_modes"] = equal
        shutil.rmtree(d, ignore_errors=True)
    return runs


def bitwise_equal(out: Path, item: str) -> bool:
    """Whether the modes' results of one repetition are bitwise equal."""
    import torch

    model, workload = item.split(":")
    results = [torch.load(out / f"{model}.{workload}.{mode}.pt") for mode in MODES]
    return all(r.keys() == results[0].keys() and all(torch.equal(r[k], results[0][k]) for k in r) for r in results)


def hit_summary(r: dict[str, Any]) -> str:
    if r["backend"] == "aotcache":
        text = f"aotcache h/m/b {r['hits']}/{r['misses']}/{r['bypasses']}"
        return text + (f" {r['bypass_reasons']}" if r["bypass_reasons"] else "")
    return "torch " + " ".join(f"{k}={v}" for k, v in sorted(r["torch_counters"].items()))


WARM = ("torch_warm", "aotcache_warm", "frames_warm")


# ---- summaries ----------------------------------------------------------------------------------------------------
def _spread(xs: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "values": xs}


def _breakdown(r: dict[str, Any]) -> dict[str, float]:
    ph = r["phases"]
    aot = {k: ph.get(k, 0.0) for k in ("key_s", "lookup_s", "load_s")}
    frame_load = ph.get("frame_load_s", 0.0)
    return {
        "tracing_s": ph["tracing_s"],
        "guards_s": ph["guards_s"],
        "dynamo_other_s": ph["dynamo_other_s"],
        **aot,
        "frame_load_s": frame_load,
        "backend_rest_s": max(ph["backend_s"] - sum(aot.values()), 0.0),
        "run_s": ph["run_s"],
        "dynamo_s": ph["dynamo_s"],
        "backend_s": ph["backend_s"],
        "dynamo_share": ph["dynamo_s"] / r["first_result_s"] if r["first_result_s"] else 0.0,
    }


def warm_all_hit(r: dict[str, Any]) -> bool:
    """Every graph of a warm process came from its system's cache."""
    if r["backend"] == "aotcache":
        return r["misses"] == 0 and r["bypasses"] == 0 and r["hits"] > 0
    c = r["torch_counters"]
    return (
        c.get("autograd_cache_hit", 0) > 0
        and not c.get("autograd_cache_miss")
        and not c.get("autograd_cache_bypass")
        and not c.get("fxgraph_cache_miss")
    )


def summarize_item(item: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_mode = {m: [r for r in runs if r["mode"] == m] for m in MODES}
    modes: dict[str, Any] = {}
    for mode, rs in by_mode.items():
        parts = [_breakdown(r) for r in rs]
        modes[mode] = {
            "first_result_s": _spread([r["first_result_s"] for r in rs]),
            "process_wall_s": _spread([r["process_wall_s"] for r in rs]),
            "breakdown_median_s": {k: statistics.median(p[k] for p in parts) for k in parts[0]},
            "graphs": [r["dynamo"]["graphs"] for r in rs],
            "counters": [
                {k: r[k] for k in ("hits", "misses", "bypasses", "errors", "bypass_reasons")}
                if r["backend"] == "aotcache"
                else r["torch_counters"]
                for r in rs
            ],
        }
    med = {m: s["first_result_s"]["median"] for m, s in modes.items()}
    pairs = {(r["mode"], r["rep"]): r["first_result_s"] for r in runs}
    reps = sorted({r["rep"] for r in runs})
    return {
        "item": item,
        "description": zoo_models.MODELS[item.split(":")[0]].description,
        "modes": modes,
        "ratios": {
            "warm_aotcache_over_warm_torch": med["aotcache_warm"] / med["torch_warm"],
            "warm_aotcache_over_warm_torch_pairs": [
                pairs[("aotcache_warm", i)] / pairs[("torch_warm", i)] for i in reps
            ],
            "cold_aotcache_over_warm_aotcache": med["aotcache_cold"] / med["aotcache_warm"],
            "cold_torch_over_warm_torch": med["torch_cold"] / med["torch_warm"],
            "cold_torch_over_warm_aotcache": med["torch_cold"] / med["aotcache_warm"],
            "warm_frames_over_warm_torch": med["frames_warm"] / med["torch_warm"],
            "warm_frames_over_warm_torch_pairs": [pairs[("frames_warm", i)] / pairs[("torch_warm", i)] for i in reps],
            "cold_aotcache_over_warm_frames": med["aotcache_cold"] / med["frames_warm"],
        },
        "dynamo_share_warm": {m: modes[m]["breakdown_median_s"]["dynamo_share"] for m in WARM},
        "warm_all_hit": {m: all(warm_all_hit(r) for r in by_mode[m]) for m in WARM},
        "frame_hits": [r["phases"].get("frame_hits", 0) for r in by_mode["frames_warm"]],
        "bitwise_equal_all_modes": all(r.get("bitwise_equal_all_modes", True) for r in runs),
    }


# ---- report -------------------------------------------------------------------------------------------------------
def _fmt(s: dict[str, Any]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})" if s["n"] > 1 else f"{s['median']:.2f}"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"{m['date']}, {m['nproc']} cores ({m['cpu_model']}), {m['platform']}, Python {m['python']}, torch "
        f"{m['torch']}, transformers {report['transformers']}, aotcache {m['aotcache']}; load average "
        f"{report['loadavg'][0]:.1f} at start, {report['loadavg'][1]:.1f} at end. Command: `{report['command']}` "
        f"({report['wall_s'] / 60:.1f} min).",
        "",
        "Time to first result in seconds (compile + first result of the item in a fresh process, after the model is "
        "built), median (min-max) of the repetitions; ratios of medians.",
        "",
        "| item | n | torch cold | torch warm | aotcache cold | aotcache warm | aotcache warm, frames on | warm aot / "
        "warm torch | warm frames / warm torch | cold aot / warm frames | Dynamo share of warm (torch / aot / frames) "
        "| frame hits | warm all hit (torch / aot / frames) | bitwise equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["items"]:
        md, r = s["modes"], s["ratios"]
        lines.append(
            f"| {s['item']} | {md['torch_cold']['first_result_s']['n']} "
            + "".join(f"| {_fmt(md[mode]['first_result_s'])} " for mode in MODES)
            + f"| {r['warm_aotcache_over_warm_torch']:.2f}x | {r['warm_frames_over_warm_torch']:.2f}x "
            f"| {r['cold_aotcache_over_warm_frames']:.1f}x "
            f"| {' / '.join(format(s['dynamo_share_warm'][m], '.0%') for m in WARM)} "
            f"| {', '.join(str(n) for n in s['frame_hits'])} "
            f"| {' / '.join('yes' if s['warm_all_hit'][m] else 'NO' for m in WARM)} "
            f"| {'yes' if s['bitwise_equal_all_modes'] else 'NO'} |"
        )
    for item, err in report.get("failures", {}).items():
        lines.append(f"| {item} | failed: {err[:300]} |")
    lines += [
        "",
        "Where the warm time goes, medians in seconds (Dynamo parts from torch._dynamo.utils.compilation_time_metrics; "
        "aotcache's key, lookup and load from its INFO hit lines; backend (rest): the rest of the backend call, for "
        "torch its AOTAutograd/FX cache lookup + load; run: execution, backward and anything compiled lazily):",
        "",
        "| item | mode | first result | " + " | ".join(name for name, _ in PARTS) + " |",
        "|---|---|---|" + "---|" * len(PARTS),
    ]
    for s in report["items"]:
        for mode in WARM:
            b = s["modes"][mode]["breakdown_median_s"]
            lines.append(
                f"| {s['item']} | {mode} | {s['modes'][mode]['first_result_s']['median']:.2f} | "
                + " | ".join(
                    "-"
                    if mode == "torch_warm" and key in ("key_s", "lookup_s", "load_s", "frame_load_s")
                    else f"{b[key]:.2f}"
                    for _, key in PARTS
                )
                + " |"
            )
    lines += [
        "",
        "Counters of the warm processes (aotcache h/m/b; torch's AOTAutograd and FX graph cache counters):",
        "",
    ]
    for s in report["items"]:
        aot = s["modes"]["aotcache_warm"]["counters"]
        torch_c = s["modes"]["torch_warm"]["counters"]
        lines.append(
            f"- {s['item']}: aotcache "
            + ", ".join(
                f"{c['hits']}/{c['misses']}/{c['bypasses']}" + (f" {c['bypass_reasons']}" if c["bypasses"] else "")
                for c in aot
            )  # fmt: skip
            + "; torch "
            + ", ".join(" ".join(f"{k}={v}" for k, v in sorted(c.items())) or "-" for c in torch_c)
        )
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "torch_cold": "#9e9e9e",
        "torch_warm": "#ef6c00",
        "aotcache_cold": "#616161",
        "aotcache_warm": "#1565c0",
        "frames_warm": "#2e7d32",
    }
    items = report["items"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, max(4.5, 0.5 * len(items) + 2.5)))
    width = 0.16
    for i, mode in enumerate(MODES):
        xs = [j + (i - (len(MODES) - 1) / 2) * width for j in range(len(items))]
        spreads = [s["modes"][mode]["first_result_s"] for s in items]
        meds = [f["median"] for f in spreads]
        err = [[f["median"] - f["min"] for f in spreads], [f["max"] - f["median"] for f in spreads]]
        a.bar(xs, meds, width, yerr=err, capsize=2, color=colors[mode], label=mode.replace("_", " "))
    for j, s in enumerate(items):
        r = s["ratios"]
        text = f"{r['warm_aotcache_over_warm_torch']:.2f}x\n{r['warm_frames_over_warm_torch']:.2f}x"
        a.annotate(text, (j, 1.0), xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=7)
    a.set_yscale("log")
    a.set_ylim(top=a.get_ylim()[1] * 6)
    a.set_xticks(range(len(items)), [s["item"] for s in items], fontsize=8, rotation=25)
    a.set_ylabel("time to first result, s (log; median, min-max)")
    a.set_title(
        "Compile + first result in a fresh process\n(above the bars: warm aotcache / warm torch, frames off; on)",
        fontsize=9,
    )
    a.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=5)
    palette = ("#8d6e63", "#a1887f", "#d7ccc8", "#fdd835", "#43a047", "#1e88e5", "#2e7d32", "#fb8c00", "#bdbdbd")
    rows = [(f"{s['item']} {m.split('_')[0]}", s["modes"][m]["breakdown_median_s"]) for s in items for m in WARM]
    for i, (_, values) in enumerate(rows):
        left = 0.0
        for (name, key), color in zip(PARTS, palette):
            v = max(values.get(key, 0.0), 0.0)
            b.barh(i, v, left=left, color=color, label=name if i == 0 else None)
            left += v
    b.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    b.invert_yaxis()
    b.set_xlabel("seconds (medians)")
    b.set_title("Where the warm time goes", fontsize=10)
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4)
    m = report["machine"]
    fig.suptitle(
        f"Hugging Face zoo, torch's caches vs aotcache: {m['date'][:10]}, {m['nproc']} cores ({m['cpu_model']}), "
        f"torch {m['torch']}, aotcache {m['aotcache']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help=f"comma-separated models (default: all: {', '.join(zoo_models.MODELS)})")
    parser.add_argument("--items", help="comma-separated MODEL:WORKLOAD items instead of the representative ones")
    parser.add_argument("--reps", type=int, default=2, help="fresh processes per mode and item (default 2)")
    parser.add_argument("--out-dir", default=str(BENCH / "results"))
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per worker process")
    parser.add_argument("--replot", metavar="ZOO_JSON", help="run nothing: redraw zoo.md and zoo.png beside ZOO_JSON")
    args = parser.parse_args()
    if args.replot:
        report = json.loads(Path(args.replot).read_text())
        (Path(args.replot).parent / "zoo.md").write_text(markdown(report))
        plot(report, Path(args.replot).parent / "zoo.png")
        return 0
    if args.items:
        items = zoo_models.parse_items(args.items)
    else:
        models = args.models.split(",") if args.models else list(zoo_models.MODELS)
        unknown = [m for m in models if m not in zoo_models.MODELS]
        if unknown:
            parser.error(f"unknown models {unknown}; known: {', '.join(zoo_models.MODELS)}")
        items = [i for i in DEFAULT_ITEMS if i.split(":")[0] in models]
    import transformers
    from run import machine_info

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load_start = os.getloadavg()[0]
    machine = machine_info()
    work = Path(tempfile.mkdtemp(prefix="aotcache-zoo-bench-"))
    summaries, all_runs, failures = [], [], {}
    try:
        for item in items:
            print(f"{item}: {zoo_models.MODELS[item.split(':')[0]].description}; {args.reps} reps", flush=True)
            try:
                runs = measure_item(item, args.reps, work, args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # reported; the other items still run
                print(f"  {item} FAILED: {e}", flush=True)
                failures[item] = str(e)
                continue
            all_runs += runs
            summaries.append(summarize_item(item, runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "machine": machine,
        "transformers": transformers.__version__,
        "command": " ".join(["bench/zoo.py", *sys.argv[1:]]),
        "wall_s": time.perf_counter() - t0,
        "loadavg": [load_start, os.getloadavg()[0]],
        "modes": MODE_DOCS,
        "reps": args.reps,
        "items": summaries,
        "failures": failures,
        "runs": all_runs,
    }
    (out_dir / "zoo.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (out_dir / "zoo.md").write_text(text)
    print()
    print(text)
    if summaries and not args.no_plot:
        plot(report, out_dir / "zoo.png")
        print(f"wrote {out_dir / 'zoo.png'}")
    print(f"wrote {out_dir / 'zoo.json'}, {out_dir / 'zoo.md'} in {report['wall_s'] / 60:.1f} min")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
