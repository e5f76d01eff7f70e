"""Runs the cacheability cases (tests/python/cacheability_cases.py) in three fresh processes and prints a markdown
table: aotcache's verdict in each process beside torch 2.13's own AOTAutograd cacheability verdict.

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
TESTS = ROOT / "tests" / "python"
sys.path.insert(0, str(TESTS))

from cacheability_cases import CASES  # noqa: E402


def run_pass(variant: str, cache: Path, out: Path, names: list[str], torch_verdict: bool) -> dict:
    env = dict(os.environ, AOTCACHE_DIR=str(cache), PYTHONPATH=str(TESTS))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(out.parent / "inductor")
    out.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, str(TESTS / "cacheability_worker.py"), variant, str(out), *names]
    if torch_verdict:
        args.append("--torch-verdict")
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


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="aotcache-cacheability-"))
    names = [c.name for c in CASES]
    a = run_pass("a", root / "cache", root / "a", names, torch_verdict=True)
    shutil.copytree(root / "cache", root / "cache_c")
    b = run_pass("a", root / "cache", root / "b", names, torch_verdict=False)
    c = run_pass("b", root / "cache_c", root / "c", [x.name for x in CASES if x.changes_in_b], torch_verdict=False)
    print("| case | expected | aotcache: 1st process | 2nd process | implementation changed | torch 2.13's check |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        name = case.name
        print(
            f"| {name} | {case.expect} | {verdict(a.get(name))} | {verdict(b.get(name))} | "
            f"{verdict(c.get(name)) or 'n/a'} | {a[name].get('torch_verdict', '').replace('|', '/')} |"
        )
    if "--keep" not in sys.argv:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
