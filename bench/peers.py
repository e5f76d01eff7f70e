"""Every warm start side by side with eager (the floor): torch's own caches and mechanisms, and aotcache.

    .venv/bin/python bench/peers.py                          # the zoo's items + the scale rows (make bench-peers)
    .venv/bin/python bench/peers.py --items gpt2:train,frames56:infer --reps 2
    .venv/bin/python bench/peers.py --replot bench/results/peers.json   # redraw peers.md and peers.png

Per item and repetition, fresh processes (tests/python/support/zoo_worker.py), in this order:
  eager            no torch.compile at all: the floor (Dynamo and Inductor never imported)
  torch_cold/warm  backend "inductor" with torch's FX graph + AOTAutograd caches; warm on the directory cold left
  mega_cold/warm   the same, plus torch's mega-cache: the cold process saves `torch.compiler.save_cache_artifacts()`;
                   the warm one starts on an EMPTY TORCHINDUCTOR_CACHE_DIR and loads them
                   (`load_cache_artifacts`) inside the measured window, before the first call (what the mega-cache is
                   for: a new machine or container)
  precompile_cold/warm  torch's caches plus Dynamo's caching precompile (TORCH_CACHING_PRECOMPILE=1, experimental)
  aot_cold/warm    `torch.compile(model, fullgraph=True)` AOT-compiled for the item's inputs and saved (torch's
                   experimental aot_compile); the warm process loads it instead of compiling (train and infer items
                   only: one fullgraph call of the model); warm on the directory cold left
  aotcache_cold    backend "aotcache", empty directories, frame cache on
  aotcache_warm    the frame cache off (AOTCACHE_FRAMES=0): Dynamo traces, every graph loaded from its entry
  frames_warm      the frame cache on: frames run without Dynamo's tracing
  frames_fresh     as frames_warm on an EMPTY TORCHINDUCTOR_CACHE_DIR (kernels come from the entries' bundles): the
                   counterpart of mega_warm

The headline is the time to first result: from the process's start to the item's first result, less the model's
construction (the same in every mode). Everything a compile path adds is inside: importing Dynamo, Inductor and
aotcache, loading caches, guards, the first compiled run. `first_result_s` (the item's call alone) is reported too.
A mode that fails on an item (an exception, a timeout) gets its error in the table; a warm mode whose cold failed is
not run. Results are compared with torch_cold's: bitwise for every compiled mode, within tolerance for eager (other
kernels). Writes OUT_DIR/peers.json, peers.md, peers.png (default OUT_DIR: bench/results).
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

# system -> its modes in process order; mode -> zoo_worker backend
SYSTEMS = {
    "eager": ("eager",),
    "torch": ("torch_cold", "torch_warm"),
    "mega": ("mega_cold", "mega_warm"),
    "precompile": ("precompile_cold", "precompile_warm"),
    "aot": ("aot_cold", "aot_warm"),
    "aotcache": ("aotcache_cold", "aotcache_warm", "frames_warm", "frames_fresh"),
}
BACKEND = {
    "eager": "eager",
    "torch": "inductor-cached",
    "mega": "inductor-mega",
    "precompile": "inductor-precompile",
    "aot": "aot-compile",
    "aotcache": "aotcache",
}
MODES = tuple(m for modes in SYSTEMS.values() for m in modes)
SYSTEM_OF = {m: system for system, modes in SYSTEMS.items() for m in modes}
WARM = ("torch_warm", "mega_warm", "precompile_warm", "aot_warm", "aotcache_warm", "frames_warm", "frames_fresh")
COLD = ("torch_cold", "mega_cold", "precompile_cold", "aot_cold", "aotcache_cold")
TORCH_WARM = ("torch_warm", "mega_warm", "precompile_warm", "aot_warm")
LABELS = {
    "eager": "eager",
    "torch_warm": "torch caches",
    "mega_warm": "mega-cache (empty dir)",
    "precompile_warm": "caching_precompile",
    "aot_warm": "aot_compile",
    "aotcache_warm": "aotcache, frames off",
    "frames_warm": "aotcache",
    "frames_fresh": "aotcache (empty Inductor dir)",
}
DEFAULT_ITEMS = (
    *(f"{m}:train" for m in zoo_models.MODELS),
    "gpt2:generate",
    "gpt2:infer",
    "gpt2-124m:train",
    "gpt2-124m:infer",
    "frames56:infer",
)
EAGER_RTOL, EAGER_ATOL = 1e-3, 1e-4


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("TORCHINDUCTOR_", "AOTCACHE_", "TORCH_COMPILE_", "TORCH_CACHING_", "ZOO_")):
            del env[name]
    env.update(PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(TESTS), str(BENCH)]))
    return env


def _env(mode: str, d: Path) -> dict[str, str]:
    system = SYSTEM_OF[mode]
    env = _clean_env()
    inductor = d / f"{system}-inductor"
    if mode in ("mega_warm", "frames_fresh"):
        inductor = d / f"{mode}-inductor"  # empty: the artifacts or the entries' kernels fill it
    env["TORCHINDUCTOR_CACHE_DIR"] = str(inductor)
    if system == "aotcache":
        env["AOTCACHE_DIR"] = str(d / "aotcache")
        env["AOTCACHE_FRAMES"] = "0" if mode == "aotcache_warm" else "1"
    if system == "mega":
        env["ZOO_MEGA_FILE"] = str(d / "mega.bin")
    if system == "precompile":
        env["TORCH_CACHING_PRECOMPILE"] = "1"
    if system == "aot":
        env["ZOO_AOT_FILE"] = str(d / "aot.bin")
    return env


def run_worker(item: str, mode: str, d: Path, timeout_s: float) -> dict[str, Any]:
    """One fresh process; its row, or {"error": ...} when it failed."""
    system = SYSTEM_OF[mode]
    cmd = [sys.executable, str(TESTS / "zoo_worker.py"), BACKEND[system], str(d / "out"), "--label", mode, item]
    cmd[-1:-1] = ["--timeout", str(int(timeout_s))]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=_env(mode, d), capture_output=True, text=True, timeout=timeout_s + 120, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"timed out after {timeout_s + 120:.0f} s"}
    wall = time.perf_counter() - t0
    rows = [json.loads(ln[len("ZOO ") :]) for ln in proc.stdout.splitlines() if ln.startswith("ZOO ")]
    if proc.returncode != 0 or len(rows) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"mode": mode, "error": f"exit {proc.returncode}: {tail[0][:400]}"}
    row = rows[0]
    row.update(mode=mode, process_wall_s=wall, loadavg_1m_at_start=load)
    if "exception" in row:
        row["error"] = row["exception"].split("\n", 1)[0][:400]
    return row


def measure_item(item: str, reps: int, work: Path, timeout_s: float, systems: list[str]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        d = work / f"{item.replace(':', '-')}-{rep}"
        order = systems if rep % 2 == 0 else [systems[0], *reversed(systems[1:])]  # eager first, then alternate
        rep_runs = []
        for system in order:
            failed = None
            for mode in SYSTEMS[system]:
                if failed:
                    r = {"mode": mode, "error": f"not run: {failed} failed"}
                else:
                    r = run_worker(item, mode, d, timeout_s)
                    if "error" in r and mode.endswith("_cold"):
                        failed = mode
                r["rep"], r["item"] = rep, item
                rep_runs.append(r)
                print(f"  {item:<16} {mode:<16} rep {rep}: {_line(r)}", flush=True)
        equal = compare(d / "out", item, [r["mode"] for r in rep_runs if "error" not in r])
        for r in rep_runs:
            r["equal"] = equal.get(r["mode"])
        runs += rep_runs
        shutil.rmtree(d, ignore_errors=True)
    return runs


def _line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"FAILED {r['error'][:200]}"
    text = f"to first result {r['to_first_result_s']:6.2f}s (call {r['first_result_s']:6.2f}s)"
    if r["backend"] == "aotcache":
        text += f" h/m/b {r['hits']}/{r['misses']}/{r['bypasses']} frames {r['phases'].get('frame_hits', 0)}"
    return text


def compare(out: Path, item: str, modes: list[str]) -> dict[str, str]:
    """Each mode's results against torch_cold's: "bitwise", "close" (eager within tolerance) or "DIFFERENT"."""
    import torch

    model, workload = item.split(":")

    def load(mode: str) -> dict[str, Any]:
        return torch.load(out / f"{model}.{workload}.{mode}.pt")

    reference_mode = "torch_cold" if "torch_cold" in modes else next((m for m in modes if m != "eager"), None)
    if reference_mode is None:
        return {}
    ref = load(reference_mode)
    verdict = {}
    for mode in modes:
        r = load(mode)
        same_keys = r.keys() == ref.keys()
        if same_keys and all(torch.equal(r[k], ref[k]) for k in r):
            verdict[mode] = "bitwise"
        elif (
            mode == "eager"
            and same_keys
            and all(
                torch.allclose(r[k].double(), ref[k].double(), rtol=EAGER_RTOL, atol=EAGER_ATOL)
                if r[k].is_floating_point()
                else torch.equal(r[k], ref[k])
                for k in r
            )
        ):
            verdict[mode] = "close"
        else:
            verdict[mode] = "DIFFERENT"
    return verdict


# ---- summaries ----------------------------------------------------------------------------------------------------
def _spread(xs: list[float]) -> dict[str, Any] | None:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "values": xs}


def _parts(r: dict[str, Any]) -> dict[str, float]:
    """A warm start against eager's, phase by phase (seconds): what the process imported before the item, the
    item's compile path (Dynamo, frame load incl. guards and graphs), its first run, the collections in it."""
    ph = r["phases"]
    frame_load = ph.get("frame_load_s", 0.0)
    return {
        "imports_s": r["process"]["import_s"],
        "between_s": max(r["to_first_result_s"] - r["process"]["import_s"] - r["first_result_s"], 0.0),
        "dynamo_s": ph.get("dynamo_s", 0.0),
        "backend_s": ph.get("backend_s", 0.0),
        "frame_load_s": frame_load,
        "run_s": ph.get("run_s", r["first_result_s"]),
        "gc_s": r.get("gc", {}).get("seconds", 0.0),
        "gc_full": r.get("gc", {}).get("full", 0),
    }


def summarize_item(item: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode in MODES:
        rs = [r for r in runs if r["mode"] == mode]
        ok = [r for r in rs if "error" not in r]
        errors = sorted({r["error"] for r in rs if "error" in r})
        entry: dict[str, Any] = {
            "to_first_result_s": _spread([r["to_first_result_s"] for r in ok]),
            "first_result_s": _spread([r["first_result_s"] for r in ok]),
            "errors": errors,
            "equal": sorted({r["equal"] for r in ok if r.get("equal")}),
        }
        if ok:
            parts = [_parts(r) for r in ok]
            entry["parts_median_s"] = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
            entry["counters"] = [
                {k: r[k] for k in ("hits", "misses", "bypasses")} | {"frames": r["phases"].get("frame_hits", 0)}
                if r["backend"] == "aotcache"
                else r["torch_counters"]
                for r in ok
            ]
        modes[mode] = entry

    def med(mode: str) -> float | None:
        """A mode's median; None where it failed, or (a compiled mode) where its result differs from torch_cold's.
        Eager stays the floor either way: in a training step with dropout its random numbers are eager's, not
        Inductor's, so its result differs by design."""
        s = modes[mode]["to_first_result_s"]
        wrong = mode != "eager" and "DIFFERENT" in modes[mode]["equal"]
        return None if s is None or modes[mode]["errors"] or wrong else s["median"]

    eager, ours = med("eager"), med("frames_warm")
    torch_best = min(((med(m), m) for m in TORCH_WARM if med(m) is not None), default=(None, None))
    spec = {**zoo_models.MODELS, **zoo_models.SCALE_MODELS}[item.split(":")[0]]
    return {
        "item": item,
        "description": spec.description,
        "modes": modes,
        "aotcache_minus_eager_s": None if eager is None or ours is None else ours - eager,
        "aotcache_over_eager": None if not eager or ours is None else ours / eager,
        "best_torch_mode": torch_best[1],
        "aotcache_over_best_torch": None if torch_best[0] is None or ours is None else ours / torch_best[0],
        "frames": [c.get("frames", 0) for c in modes["frames_warm"].get("counters", [])],
    }


# ---- report -------------------------------------------------------------------------------------------------------
def _cell(entry: dict[str, Any], key: str = "to_first_result_s", eager: bool = False) -> str:
    if entry["errors"]:
        return "fails: " + "; ".join(e.replace("|", "/")[:140] for e in entry["errors"])
    s = entry[key]
    if s is None:
        return "-"
    text = f"{s['median']:.2f}" + (f" ({s['min']:.2f}-{s['max']:.2f})" if s["n"] > 1 else "")
    return text + (" DIFFERENT" if "DIFFERENT" in entry["equal"] and not eager else "")


def _x(v: float | None, fmt: str = ".2f", suffix: str = "x") -> str:
    return "-" if v is None else f"{v:{fmt}}{suffix}"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"{m['date']}, {m['nproc']} cores ({m['cpu_model']}), {m['platform']}, Python {m['python']}, torch "
        f"{m['torch']}, transformers {report['transformers']}, aotcache {m['aotcache']}; load average "
        f"{report['loadavg'][0]:.1f} at start, {report['loadavg'][1]:.1f} at end. Command: `{report['command']}` "
        f"({report['wall_s'] / 60:.1f} min, {report['reps']} repetition(s)).",
        "",
        "**Warm starts against eager.** Time to first result in seconds: from the process's start to the item's "
        "first result, less the model's construction (imports of the compile path, cache loads, guards and the "
        "first compiled run inside), median (min-max) of the repetitions. A peer that fails says why.",
        "",
        "| item | " + " | ".join(LABELS[m] for m in ("eager", *WARM)) + " | aotcache - eager | aotcache / eager "
        "| aotcache / best torch | results |",
        "|---|" + "---|" * (len(WARM) + 5),
    ]
    for s in report["items"]:
        md = s["modes"]
        results = ", ".join(
            f"{LABELS.get(m, m)} {'/'.join(md[m]['equal'])}" for m in ("eager", *WARM) if md[m]["equal"]
        )
        best = LABELS.get(s["best_torch_mode"] or "", "-")
        lines.append(
            f"| {s['item']} | "
            + " | ".join(_cell(md[m], eager=m == "eager") for m in ("eager", *WARM))
            + f" | {_x(s['aotcache_minus_eager_s'], '+.2f', ' s')} | {_x(s['aotcache_over_eager'])} "
            f"| {_x(s['aotcache_over_best_torch'])} ({best}) | {results} |"
        )
    for item, err in report.get("failures", {}).items():
        lines.append(f"| {item} | failed: {err[:300]} |")
    lines += [
        "",
        "Cold processes (the same measure; each fills its system's cache):",
        "",
        "| item | " + " | ".join(COLD) + " |",
        "|---|" + "---|" * len(COLD),
    ]
    for s in report["items"]:
        lines.append(f"| {s['item']} | " + " | ".join(_cell(s["modes"][m]) for m in COLD) + " |")
    lines += [
        "",
        "**Where a warm start goes, against eager** (medians, s): imports = the process's imports before the item "
        "(torch, transformers' lazy parts excepted, and whatever the compile path adds: Dynamo, Inductor, aotcache); "
        "between = from the imports to the item's call (Dynamo's reset, the worker's setup); Dynamo = Dynamo's frame "
        "compiles less the backend; backend = the backend calls (graph loads); frame load = aotcache's served frames "
        "(entry read, guards rebuilt, graphs and kernels loaded); run = the rest of the call (execution, "
        "backward); gc = time in garbage collections inside the call (full collections counted).",
        "",
        "| item | mode | to first result | imports | between | Dynamo | backend | frame load | run | gc (full) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["items"]:
        for mode in ("eager", "torch_warm", "aotcache_warm", "frames_warm", "frames_fresh"):
            e = s["modes"][mode]
            if "parts_median_s" not in e:
                continue
            p = e["parts_median_s"]
            lines.append(
                f"| {s['item']} | {LABELS[mode]} | {e['to_first_result_s']['median']:.3f} | {p['imports_s']:.3f} "
                f"| {p['between_s']:.3f} | {p['dynamo_s']:.3f} | {p['backend_s']:.3f} | {p['frame_load_s']:.3f} "
                f"| {p['run_s']:.3f} | {p['gc_s']:.3f} ({p['gc_full']:.0f}) |"
            )
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "torch_warm": "#ef6c00",
        "mega_warm": "#8e24aa",
        "precompile_warm": "#6d4c41",
        "aot_warm": "#c62828",
        "aotcache_warm": "#90caf9",
        "frames_warm": "#1565c0",
        "frames_fresh": "#2e7d32",
    }
    items = report["items"]
    fig, ax = plt.subplots(figsize=(max(10, 1.3 * len(items) + 3), 5.5))
    width = 0.8 / len(WARM)
    for i, mode in enumerate(WARM):
        xs, ys = [], []
        for j, s in enumerate(items):
            eager, e = s["modes"]["eager"]["to_first_result_s"], s["modes"][mode]
            x = j + (i - (len(WARM) - 1) / 2) * width
            if e["to_first_result_s"] is None or eager is None:
                ax.annotate("x", (x, 1.0), ha="center", va="bottom", fontsize=7, color=colors[mode])
                continue
            xs.append(x)
            ys.append(e["to_first_result_s"]["median"] / eager["median"])
        ax.bar(xs, ys, width, color=colors[mode])
    ax.axhline(1.0, color="black", linewidth=1.2, linestyle="--")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=colors[m], label=LABELS[m]) for m in WARM]
    handles.append(Line2D([0], [0], color="black", linestyle="--", label="eager (the floor)"))
    ax.set_yscale("log")
    ax.set_xticks(range(len(items)), [s["item"] for s in items], fontsize=8, rotation=25)
    ax.set_ylabel("time to first result / eager's (log)")
    ax.legend(handles=handles, fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    m = report["machine"]
    ax.set_title(
        f"Warm starts against eager (x: the mechanism failed on the item): {m['date'][:10]}, {m['nproc']} cores, "
        f"torch {m['torch']}, aotcache {m['aotcache']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", help=f"comma-separated MODEL:WORKLOAD items (default: {','.join(DEFAULT_ITEMS)})")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated systems (eager always runs)")
    parser.add_argument("--reps", type=int, default=1, help="fresh processes per mode and item (default 1)")
    parser.add_argument("--out-dir", default=str(BENCH / "results"))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per item in a worker")
    parser.add_argument(
        "--replot", metavar="PEERS_JSON", help="run nothing: summarize its runs again, redraw peers.md and peers.png"
    )
    args = parser.parse_args()
    if args.replot:
        report = json.loads(Path(args.replot).read_text())
        runs, per_item = report["runs"], len(MODES) * report["reps"]  # each item's runs, in order
        report["items"] = [
            summarize_item(s["item"], runs[i * per_item : (i + 1) * per_item]) for i, s in enumerate(report["items"])
        ]
        (Path(args.replot).parent / "peers.json").write_text(json.dumps(report, indent=1, default=repr) + "\n")
        (Path(args.replot).parent / "peers.md").write_text(markdown(report))
        plot(report, Path(args.replot).parent / "peers.png")
        return 0
    items = args.items.split(",") if args.items else list(DEFAULT_ITEMS)
    systems = ["eager", *[s for s in args.systems.split(",") if s in SYSTEMS and s != "eager"]]
    import transformers
    from run import machine_info

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load_start = os.getloadavg()[0]
    machine = machine_info()
    work = Path(tempfile.mkdtemp(prefix="aotcache-peers-"))
    summaries, all_runs = [], []
    try:
        for item in items:
            print(f"{item}: {args.reps} rep(s)", flush=True)
            runs = measure_item(item, args.reps, work, args.timeout, systems)
            all_runs += runs
            summaries.append(summarize_item(item, runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "machine": machine,
        "transformers": transformers.__version__,
        "command": " ".join(["bench/peers.py", *sys.argv[1:]]),
        "wall_s": time.perf_counter() - t0,
        "loadavg": [load_start, os.getloadavg()[0]],
        "reps": args.reps,
        "items": summaries,
        "runs": all_runs,
    }
    (out_dir / "peers.json").write_text(json.dumps(report, indent=1, default=repr) + "\n")
    text = markdown(report)
    (out_dir / "peers.md").write_text(text)
    print()
    print(text)
    plot(report, out_dir / "peers.png")
    print(f"wrote {out_dir / 'peers.json'}, peers.md, peers.png in {report['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
