"""Which frames a warm process is not served, and why: the zoo (every model and workload of
tests/python/support/zoo_models.py)
and the real clients (tests/python/support/clients_worker.py: Lightning's Trainer, PEFT LoRA) with the frame cache on.

    .venv/bin/python bench/frame_survey.py [--items all|ci|ITEM,...] [--out-dir bench/results]

One cold process records (zoo items in one process, as the zoo runs them; each client in its own), one warm process
loads. Per item: frames the cold process recorded and the reasons it bypassed, frames the warm process was served,
traced again (miss reasons) or bypassed (reasons). Writes frame_survey.md / .json.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "python" / "support"  # the workers and case tables the tests run
sys.path.insert(0, str(TESTS))


def _env(tmp: Path, cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOTCACHE_", "TORCHINDUCTOR_"))}
    env.update(
        AOTCACHE_DIR=str(tmp / cache),
        TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{cache}"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(TESTS),
    )
    return env


def _zoo(items: list[str], tmp: Path, label: str) -> dict[str, dict]:
    done = subprocess.run(
        [sys.executable, str(TESTS / "zoo_worker.py"), "aotcache", str(tmp / "out"), "--label", label, *items],
        env=_env(tmp, "zoo"),
        capture_output=True,
        text=True,
        timeout=7200,
    )
    rows = [json.loads(ln[4:]) for ln in done.stdout.splitlines() if ln.startswith("ZOO ")]
    if done.returncode != 0 and not rows:
        raise RuntimeError(f"zoo {label}: exit {done.returncode}: {done.stderr[-3000:]}")
    return {r["item"]: r.get("stats", {}).get("frames", {}) | {"_error": r.get("error")} for r in rows}


def _client(name: str, tmp: Path, label: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(TESTS / "clients_worker.py"), "aotcache", str(tmp / f"{name}.{label}.pt"), name],
        env=_env(tmp, f"client-{name}"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    stats = next((json.loads(ln[6:]) for ln in done.stdout.splitlines() if ln.startswith("STATS ")), None)
    if stats is None:
        raise RuntimeError(f"client {name} {label}: exit {done.returncode}: {done.stdout[-3000:]}{done.stderr[-2000:]}")
    return stats.get("frames", {})


def _reasons(frames: dict, prefix: str) -> str:
    found = {k[len(prefix) :]: v for k, v in frames.items() if k.startswith(prefix) and isinstance(v, int)}
    return ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "-"


def main() -> int:
    import zoo_models

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="all")
    parser.add_argument("--clients", default="lightning,peft_lora")
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    items = zoo_models.parse_items(args.items) if args.items != "none" else []
    started = time.time()
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="aotcache-frame-survey-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "out").mkdir()
        if items:
            cold, warm = _zoo(items, tmp, "cold"), None
            warm = _zoo(items, tmp, "warm")
            for item in items:
                rows[item] = {"cold": cold.get(item, {}), "warm": warm.get(item, {})}
        for name in [c for c in args.clients.split(",") if c]:
            rows[f"client:{name}"] = {"cold": _client(name, tmp, "cold"), "warm": _client(name, tmp, "warm")}
    totals: collections.Counter = collections.Counter()
    lines = [
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(started))}, torch "
        f"{__import__('torch').__version__}. Command: `bench/frame_survey.py --items {args.items} --clients "
        f"{args.clients}`",
        "",
        "| item | cold: recorded | cold: bypassed (reason count) | warm: served | warm: traced (reason count) | "
        "warm: bypassed (reason count) |",
        "|---|---|---|---|---|---|",
    ]
    for item, r in rows.items():
        c, w = r["cold"], r["warm"]
        for k, v in {**c, **w}.items():
            if k.startswith(("bypass.", "miss.")) and isinstance(v, int):
                totals[k] += v
        lines.append(
            f"| {item} | {c.get('recorded', 0)} | {_reasons(c, 'bypass.')} | {w.get('hits', 0)} | "
            f"{_reasons(w, 'miss.')} | {_reasons(w, 'bypass.')} |"
        )
    lines += [
        "",
        "Reasons over all items (cold and warm): "
        + (", ".join(f"{k} {v}" for k, v in sorted(totals.items())) or "none"),
    ]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "frame_survey.md").write_text("\n".join(lines) + "\n")
    (out / "frame_survey.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
