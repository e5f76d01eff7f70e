"""Runs program pairs (frame_pairs.py) through the three passes and judges them.

  A       backend="aotcache", a fresh cache directory: records frames and graphs (cold)
  ref     B under backend="inductor", torch's caches off (the reference), beside A
  B       backend="aotcache" on A's cache, the frame verifier on (AOTCACHE_FRAMES_VERIFY=1): every served frame
          is traced again by Dynamo and compared; Dynamo's result runs

Every pass is one process per shard (`workers` processes side by side), many pairs each. A pair passes when nothing
raised, B's results equal the reference's bit for bit, the verifier counted no mismatch, aotcache counted no internal
error, and B printed no warning the reference did not. `differs` (A's results differ from the reference's) says the
pair changes something observable; the fixed attack table requires it.

usage: python tests/python/support/frame_pairs_runner.py [--seed S --n N | --attack] [--keep DIR] [--workers W]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import frame_pairs  # noqa: E402


@dataclasses.dataclass
class Verdict:
    name: str
    operator: str
    base: str
    problems: list[str]
    differs: bool
    served: int  # frames B was served (verified)
    traced: int  # frames B traced (no usable candidate)
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def write_pairs(pairs: list[frame_pairs.Pair], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for pair in pairs:
        for module, text in pair.files.items():
            (directory / f"{module}.py").write_text(text)
    (directory / "pairs.json").write_text(json.dumps([{"name": p.name, "module": p.module} for p in pairs]))


def _shards(names: list[str], n: int) -> list[list[str]]:
    return [names[i::n] for i in range(n) if names[i::n]]


def _spawn(variant: str, backend: str, pairs_dir: Path, out: Path, names: list[str], env: dict) -> subprocess.Popen:
    with open(out.with_suffix(".log"), "w") as log:  # the child has its own descriptor
        return subprocess.Popen(
            [sys.executable, str(HERE / "frame_pairs_worker.py"), variant, backend, str(pairs_dir), str(out), *names],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _wait(procs: list[tuple[subprocess.Popen, Path]], timeout: float) -> dict:
    results = {}
    deadline = time.monotonic() + timeout
    for proc, out in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if out.exists():
            results.update(torch.load(out))
        else:
            log = out.with_suffix(".log").read_text()[-3000:]
            raise RuntimeError(f"worker {out.name} wrote nothing (rc {proc.returncode}):\n{log}")
    return results


def run(pairs: list[frame_pairs.Pair], work: Path, workers: int = 2, timeout: float = 3000) -> dict[str, dict]:
    """The three passes over `pairs`; {pass: {pair name: row}}."""
    pairs_dir, cache, inductor = work / "pairs", work / "cache", work / "inductor"
    write_pairs(pairs, pairs_dir)
    base_env = dict(os.environ)
    base_env.pop("AOTCACHE_FRAMES", None)
    base_env.update(
        {
            "AOTCACHE_DIR": str(cache),
            "TORCHINDUCTOR_CACHE_DIR": str(inductor),
            "PYTHONPATH": os.pathsep.join([str(HERE), base_env.get("PYTHONPATH", "")]),
            "HF_HUB_OFFLINE": "1",
            "PYTHONHASHSEED": "0",
        }
    )
    names = [p.name for p in pairs]
    cold = [(n, work / f"A.{i}.pt") for i, n in enumerate(_shards(names, max(1, workers // 2)))]
    refs = [(n, work / f"ref.{i}.pt") for i, n in enumerate(_shards(names, max(1, workers - len(cold))))]
    started = [(_spawn("A", "aotcache", pairs_dir, out, n, base_env), out) for n, out in cold]
    started_ref = [(_spawn("B", "inductor", pairs_dir, out, n, base_env), out) for n, out in refs]
    a = _wait(started, timeout)
    warm_env = {**base_env, "AOTCACHE_FRAMES_VERIFY": "1"}
    warm = [(n, work / f"B.{i}.pt") for i, n in enumerate(_shards(names, max(1, workers - len(refs))))]
    ref = _wait(started_ref, timeout)
    b = _wait([(_spawn("B", "aotcache", pairs_dir, out, n, warm_env), out) for n, out in warm], timeout)
    return {"A": a, "ref": ref, "B": b}


def _bitwise_equal(u: torch.Tensor, v: torch.Tensor) -> bool:
    """Equal bit for bit: NaNs in the same places with the same bits are equal (torch.equal says NaN != NaN, which
    made a pair whose reference and warm run both give NaN fail)."""
    if torch.equal(u, v):
        return True
    try:
        a, b = u.detach().contiguous().reshape(-1), v.detach().contiguous().reshape(-1)
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    except RuntimeError:
        return False


def _equal(x: dict, y: dict) -> tuple[bool, str]:
    if set(x) != set(y):
        return False, f"keys {sorted(x)} != {sorted(y)}"
    for k in x:
        u, v = x[k], y[k]
        if isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor):
            if u.dtype != v.dtype or u.shape != v.shape or not _bitwise_equal(u, v):
                diff = (u.double() - v.double()).abs().max().item() if u.shape == v.shape else "shape"
                return False, f"{k} differs (max |diff| {diff})"
        elif u != v:
            return False, f"{k}: {u!r} != {v!r}"
    return True, ""


# Pairs whose warm process must be served every frame (two or more) and trace none.
SERVED_WHOLE = ("eval_then_train", "eval_before_train")


def judge(pairs: list[frame_pairs.Pair], results: dict[str, dict]) -> list[Verdict]:
    verdicts = []
    ref_warnings = {w for row in results["ref"].values() for w in row["warnings"]}
    for pair in pairs:
        a, ref, b = (results[p].get(pair.name) for p in ("A", "ref", "B"))
        problems = []
        for label, row in (("A", a), ("ref", ref), ("B", b)):
            if row is None:
                problems.append(f"{label}: did not run")
            elif row["error"]:
                problems.append(f"{label} raised {row['error'].splitlines()[0]}")
        differs = False
        served = traced = 0
        if not problems:
            same, why = _equal(b["out"], ref["out"])
            if not same:
                problems.append(f"B (warm) != reference: {why}")
            differs = not _equal(a["out"], ref["out"])[0]
            frames = b["counters"].get("frames", {})
            served = int(frames.get("hits", 0))
            traced = int(frames.get("misses", 0))
            mismatch = int(frames.get("verify.mismatch", 0))
            if mismatch:
                problems.append(f"verifier: {mismatch} served frame(s) differ from Dynamo's trace")
            for label, row in (("A", a), ("B", b)):
                errors = row["counters"].get("internal_errors", {})
                frame_errors = {k: v for k, v in row["counters"].get("frames", {}).items() if "internal_error" in k}
                if errors or frame_errors:
                    problems.append(f"{label}: internal errors {errors or frame_errors}")
            # A warning belongs to the process (the first compile imports Inductor, whichever pair that is).
            extra = sorted(set(b["warnings"]) - ref_warnings)
            if extra:
                problems.append(f"B printed warnings the reference did not: {extra}")
            extra_cold = sorted(set(a["warnings"]) - ref_warnings)
            if extra_cold:
                problems.append(f"A (cold) printed warnings the reference did not: {extra_cold}")
            if pair.name in SERVED_WHOLE and (traced or served < 2):
                problems.append(f"{pair.name}: warm traced {traced} frame(s), served {served} (want 0, >= 2)")
        verdicts.append(Verdict(pair.name, pair.operator, pair.base, problems, differs, served, traced, pair.note))
    return verdicts


def table(verdicts: list[Verdict]) -> str:
    lines = [
        "| pair | operator | base | A != B | B: frames served / traced | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        verdict = "ok" if v.ok else "**FAIL**: " + "; ".join(v.problems)
        lines.append(
            f"| `{v.name}` | {v.operator} | {v.base} | {'yes' if v.differs else 'no'} | {v.served} / {v.traced} | "
            f"{verdict} |"
        )
    ok = sum(v.ok for v in verdicts)
    lines.append(f"\n{ok} of {len(verdicts)} pairs pass; {sum(v.differs for v in verdicts)} change the result.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--attack", action="store_true", help="the fixed attack table (default without --seed)")
    ap.add_argument("--only", default="", help="comma-separated pair names or operators")
    ap.add_argument("--bases", default="", help="comma-separated bases: every operator once in each (a sweep)")
    ap.add_argument("--keep", default="")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.bases:
        pairs = frame_pairs.pairs_in_bases(args.bases.split(","))
    elif args.seed is not None:
        pairs = frame_pairs.generated_pairs(args.seed, args.n)
    else:
        pairs = frame_pairs.attack_pairs()
    if args.only:
        wanted = set(args.only.split(","))
        pairs = [p for p in pairs if p.name in wanted or p.operator in wanted]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="aotcache-pairs-"))
    if work.exists() and args.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results = run(pairs, work, args.workers)
    verdicts = judge(pairs, results)
    print(table(verdicts))
    print(f"\n{len(pairs)} pairs in {time.monotonic() - t0:.0f} s; work dir {work}")
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
