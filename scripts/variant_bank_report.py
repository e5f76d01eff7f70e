"""Runs the whole variant bank on both sides, aotcache and torch's built-in caches, and writes a Markdown table.

    .venv/bin/python scripts/variant_bank_report.py [--out build/variant_bank.md] [--workers 2] [--cases a,b]

Each case is a pair of fresh processes on one fresh cache (tests/python/support/variant_bank.py). aotcache's side is
what tests/python/soundness/test_variant_bank.py asserts; torch's side (backend="inductor", its local AOTAutograd + FX
graph caches, a fresh TORCHINDUCTOR_CACHE_DIR per pair) is only recorded. The table goes to stdout and to --out; the
exit status is 1 when any aotcache pair did not do what its case expects.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))  # conftest
sys.path.insert(0, str(REPO / "tests" / "python" / "support"))  # variant_bank

import variant_bank as vb  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "variant_bank.md")
    parser.add_argument("--workers", type=int, default=2, help="pairs run at once (default 2)")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--sides", default=",".join(vb.SIDES), help="aotcache,torch (default both)")
    parser.add_argument("--keep", action="store_true", help="keep the scripts, caches and outputs of every pair")
    parser.add_argument(
        "--share-a",
        action="store_true",
        help="aotcache side: run each distinct process A once and start its pairs from copies of its cache (faster)",
    )
    args = parser.parse_args()

    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in vb.CASES_BY_NAME]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(vb.CASES_BY_NAME)}")
    cases = [vb.CASES_BY_NAME[n] for n in names] if names else vb.CASES
    sides = [s for s in args.sides.split(",") if s]
    if not set(sides) <= set(vb.SIDES):
        parser.error(f"--sides: choose from {vb.SIDES}")

    root = Path(tempfile.mkdtemp(prefix="aotcache-bank-"))
    bank = vb.Bank(root, share_a=args.share_a)
    results: dict[str, dict[str, vb.PairResult]] = {}
    t0 = time.perf_counter()
    print(f"variant bank: {len(cases)} cases x {len(sides)} sides, {args.workers} workers, in {root}", file=sys.stderr)
    try:
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            jobs = [(c, s) for c in cases for s in sides if s == "aotcache" or c.torch_applicable]
            futures = {pool.submit(bank.run, case, side): (case, side) for case, side in jobs}
            for done, future in enumerate(as_completed(futures), 1):
                case, side = futures[future]
                result = future.result()
                results.setdefault(case.name, {})[side] = result
                print(
                    f"[{done}/{len(futures)} {time.perf_counter() - t0:5.0f}s] {case.name} {side}: "
                    f"{result.verdict()} (expected {case.expected}, {result.seconds:.1f}s)",
                    file=sys.stderr,
                )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    report = vb.markdown_report(results)
    mode = "shared process A runs on aotcache's side" if args.share_a else "every pair ran its own A"
    report += f"\n{len(cases)} cases, {time.perf_counter() - t0:.0f}s with {args.workers} workers, {mode}.\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    failed = []
    for name, row in results.items():
        if "aotcache" in row and row["aotcache"].problems():
            failed.append(name)
            print(f"aotcache {name}: " + "\n  ".join(row["aotcache"].problems()), file=sys.stderr)
    print(f"written to {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
