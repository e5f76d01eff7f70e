"""PNG plots of a bench/run.py report (matplotlib, Agg backend): time to first result, where the warm time goes,
key speed by graph size, miss overhead and peak memory.

    .venv/bin/python bench/plot.py [bench/results/latest.json]     # redraws the plots next to the JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "cold_torch": "#9e9e9e",
    "cold_aotcache": "#616161",
    "warm_torch": "#ef6c00",
    "warm_aotcache": "#1565c0",
    "warm_aotcache_noframes": "#5c6bc0",
    "warm_aotcache_fresh": "#90caf9",
}
LABELS = {
    "cold_torch": "cold, torch",
    "cold_aotcache": "cold, aotcache (miss)",
    "warm_torch": "warm, torch's caches",
    "warm_aotcache": "warm, aotcache",
    "warm_aotcache_noframes": "warm, aotcache, frames off",
    "warm_aotcache_fresh": "warm, aotcache, empty Inductor dir",
}


def _subtitle(report: dict[str, Any]) -> str:
    m = report["machine"]
    return f"{m['date'][:10]}, {m['nproc']} cores ({m['cpu_model']}), torch {m['torch']}, aotcache {m['aotcache']}"


def plot_first_result(report: dict[str, Any], path: Path) -> None:
    models = report["models"]
    modes = [m for m in COLORS if any(m in s["modes"] for s in models)]
    width = 0.8 / len(modes)
    fig, ax = plt.subplots(figsize=(11, 5))
    for i, mode in enumerate(modes):
        xs, meds, lo, hi = [], [], [], []
        for j, s in enumerate(models):
            if mode not in s["modes"]:
                continue
            f = s["modes"][mode]["first_result_s"]
            xs.append(j + (i - (len(modes) - 1) / 2) * width)
            meds.append(f["median"])
            lo.append(f["median"] - f["min"])
            hi.append(f["max"] - f["median"])
        ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, color=COLORS[mode], label=LABELS[mode])
    for j, s in enumerate(models):
        r = s["ratios"]
        ax.annotate(
            f"{r['cold_over_warm_aotcache']:.1f}x cold/warm\n{r['warm_aotcache_over_warm_torch']:.2f}x aot/torch",
            (j, 1.0),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="top",
            fontsize=7,
        )
    ax.set_yscale("log")
    ax.set_xticks(range(len(models)), [s["model"] for s in models])
    ax.set_ylabel("time to first result, s (log; median, min-max)")
    ax.set_title("Compile + first step in a fresh process\n" + _subtitle(report), fontsize=10)
    ax.set_ylim(top=ax.get_ylim()[1] * 4)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_warm_breakdown(report: dict[str, Any], path: Path) -> None:
    """Stacked bars per model and warm mode: Dynamo, key (ISA probe apart), lookup, load / torch's backend, run."""
    parts = [
        ("Dynamo", "#8d6e63"),
        ("vec-ISA probe", "#e53935"),
        ("key (rest)", "#fdd835"),
        ("lookup", "#43a047"),
        ("load", "#1e88e5"),
        ("frames: load", "#3949ab"),
        ("torch backend (cache lookup + load)", "#fb8c00"),
        ("run (+ lazy compile)", "#bdbdbd"),
    ]
    rows: list[tuple[str, dict[str, float]]] = []
    for s in report["models"]:
        for mode in ("warm_torch", "warm_aotcache", "warm_aotcache_noframes", "warm_aotcache_fresh"):
            if mode not in s["modes"]:
                continue
            x = s["modes"][mode]
            ph = x["phases_median_s"]
            probe = x["vec_isa_probe_s"]
            if mode == "warm_torch":
                # Torch probes the vector ISA when the first step loads its kernels (in run, else in the backend).
                in_run = min(probe, ph["run_s"])
                values = {
                    "Dynamo": ph["dynamo_s"],
                    "vec-ISA probe": probe,
                    "torch backend (cache lookup + load)": max(ph["backend_s"] - (probe - in_run), 0.0),
                    "run (+ lazy compile)": ph["run_s"] - in_run,
                }
            else:
                values = {
                    "Dynamo": ph["dynamo_s"],
                    "vec-ISA probe": min(probe, ph["key_s"]),
                    "key (rest)": max(ph["key_s"] - probe, 0.0),
                    "lookup": ph["lookup_s"],
                    "load": ph["load_s"],
                    "frames: load": ph.get("frame_load_s", 0.0),
                    # a bypassed graph compiles inside the backend: not key, lookup or load
                    "torch backend (cache lookup + load)": max(
                        ph["backend_s"] - ph["key_s"] - ph["lookup_s"] - ph["load_s"], 0.0
                    ),
                    "run (+ lazy compile)": ph["run_s"],
                }
            rows.append((f"{s['model']} {LABELS[mode].removeprefix('warm, ')}", values))
    fig, ax = plt.subplots(figsize=(11, 0.35 * len(rows) + 1.8))
    for i, (_, values) in enumerate(rows):
        left = 0.0
        for name, color in parts:
            v = max(values.get(name, 0.0), 0.0)
            ax.barh(i, v, left=left, color=color, label=name if i == 0 else None)
            left += v
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (medians)")
    ax.set_title("Where the warm time to first result goes\n" + _subtitle(report), fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, c in parts]
    ax.legend(handles, [n for n, _ in parts], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_key_speed(report: dict[str, Any], path: Path) -> bool:
    ks = report.get("key_speed")
    if not ks:
        return False
    rs = ks["results"]
    nodes = [r["nodes"] for r in rs]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot(nodes, [r["aotcache"]["median_ms"] for r in rs], "o-", color=COLORS["warm_aotcache"], label="aotcache")
    t = [(r["nodes"], r["torch"]["median_ms"]) for r in rs if not r["torch"].get("bypass")]
    ax.plot([a for a, _ in t], [b for _, b in t], "s-", color=COLORS["warm_torch"], label="torch AOTAutograd key")
    for r in rs:
        if r.get("ratio_torch_over_aotcache"):
            ax.annotate(f"{r['ratio_torch_over_aotcache']:.0f}x", (r["nodes"], r["aotcache"]["median_ms"]), fontsize=8,
                        textcoords="offset points", xytext=(4, -12))  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FX nodes")
    ax.set_ylabel("key computation, ms (median)")
    ax.set_title("Cache key time by graph size\n" + _subtitle(report), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_overheads(report: dict[str, Any], path: Path) -> None:
    models = report["models"]
    goal = report["goals"]["miss_overhead"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [s["model"] for s in models]
    shares = [100 * s["miss_overhead"]["share"] if s["miss_overhead"] else 0.0 for s in models]
    a.bar(range(len(models)), shares, color=COLORS["cold_aotcache"])
    for j, s in enumerate(models):
        if not s["miss_overhead"]:
            a.annotate("no miss\n(bypass)", (j, 0), ha="center", va="bottom", fontsize=7)
    a.axhline(3.0, color="red", linestyle="--", linewidth=1, label="goal: 3%")
    a.set_xticks(range(len(models)), names, fontsize=8, rotation=20)
    a.set_ylabel("% of the compile (median of cold_aotcache runs)")
    a.set_title(f"Added by aotcache on a miss ({goal['met_on']} under 3%)", fontsize=9)
    a.legend(fontsize=8)
    width = 0.4
    for i, mode in enumerate(("warm_torch", "warm_aotcache")):
        a_vals = [s["modes"][mode]["max_rss_mb"]["median"] for s in models]
        b.bar(
            [j + (i - 0.5) * width for j in range(len(models))], a_vals, width, color=COLORS[mode], label=LABELS[mode]
        )
    b.set_xticks(range(len(models)), names, fontsize=8, rotation=20)
    b.set_ylabel("peak RSS of the warm process, MB (median)")
    b.set_ylim(top=b.get_ylim()[1] * 1.25)
    b.set_title("Peak memory, warm start", fontsize=9)
    b.legend(fontsize=8)
    fig.suptitle(_subtitle(report), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_all(report: dict[str, Any], out_dir: Path) -> list[Path]:
    out = []
    for name, fn in (
        ("first_result.png", plot_first_result),
        ("warm_breakdown.png", plot_warm_breakdown),
        ("key_speed.png", plot_key_speed),
        ("overheads.png", plot_overheads),
    ):
        path = out_dir / name
        if fn(report, path) is not False:
            out.append(path)
    return out


if __name__ == "__main__":
    src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent / "results/latest.json")
    for p in plot_all(json.loads(src.read_text()), src.parent):
        print(f"wrote {p}")
