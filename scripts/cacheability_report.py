"""Runs the cacheability cases (tests/python/support/cacheability_cases.py) in three fresh processes and prints a
markdown table: aotcache's verdict in each process beside torch 2.13's own AOTAutograd cacheability verdict.

usage: .venv/bin/python scripts/cacheability_report.py [--keep DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "python" / "support"  # the workers and case tables the tests run
sys.path.insert(0, str(TESTS))

from cacheability_cases import CASES  # noqa: E402


def run_pass(
    variant: str, cache: Path, out: Path, names: list[str], torch_verdict: bool, torch_cache: Path | None = None
) -> dict:
    env = dict(os.environ, AOTCACHE_DIR=str(cache), PYTHONPATH=str(TESTS))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(torch_cache or out.parent / "inductor")
    out.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, str(TESTS / "cacheability_worker.py"), variant, str(out), *names]
    if torch_verdict:
        args.append("--torch-verdict")
    if torch_cache is not None:
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1")
        args.append("--torch-cache")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return {r["case"]: r for r in (json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{"))}


def verdict(row: dict | None) -> str:
    if row is None:
        return ""
    if "error" in row:
        return "ERROR"
    if row["bypasses"]:
        return "bypass `" + ",".join(row["bypass_reasons"]) + "`"
    return "hit" if row["hits"] else "miss"


def torch_outcome(row: dict | None, out: Path, name: str) -> str:
    if row is None:
        return "n/a"
    if "error" in row:
        return "ERROR"
    import torch

    got, eager = torch.load(out / f"{name}.b.pt"), torch.load(out / f"{name}.b.eager.pt")
    right = all(torch.allclose(x, e, atol=1e-4, rtol=1e-4) for x, e in zip(got, eager))
    return ("hit" if row["torch_cache_hits"] else "miss") + (", correct" if right else ", **wrong result**")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="aotcache-cacheability-"))
    names = [c.name for c in CASES]
    a = run_pass("a", root / "cache", root / "a", names, torch_verdict=True)
    shutil.copytree(root / "cache", root / "cache_c")
    b = run_pass("a", root / "cache", root / "b", names, torch_verdict=False)
    changed = [x.name for x in CASES if x.changes_in_b]
    c = run_pass("b", root / "cache_c", root / "c", changed, torch_verdict=False)
    # Torch's own caches on the same implementation change: does it hit, and is the result still right?
    run_pass("a", root / "unused", root / "ta", changed, False, torch_cache=root / "torch_cache")
    tb = run_pass("b", root / "unused", root / "tb", changed, False, torch_cache=root / "torch_cache")
    print(
        "| case | expected | aotcache: 1st process | 2nd process | implementation changed | torch 2.13's check "
        "| torch's caches, implementation changed |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in CASES:
        name = case.name
        print(
            f"| {name} | {case.expect} | {verdict(a.get(name))} | {verdict(b.get(name))} | "
            f"{verdict(c.get(name)) or 'n/a'} | {a[name].get('torch_verdict', '').replace('|', '/')} | "
            f"{torch_outcome(tb.get(name), root / 'tb', name)} |"
        )
    if "--keep" not in sys.argv:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
