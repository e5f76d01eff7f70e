"""The adversarial suite: what real users run, under aotcache and under plain backend="inductor", fresh processes.

Passes over every case of adversarial_cases.py (adversarial_worker.py, several cases per process):
  inductor  backend="inductor", torch's own caches off (and each case under backend="eager" too)   } concurrently
  cold      backend="aotcache" on an empty AOTCACHE_DIR                                              }
  warm      backend="aotcache" on the cold pass's directory (2 processes); cases with `damage` have their entries
            flipped or truncated first
  warm_noframes   the same with the frame cache off, on a copy of that directory (when frames are on: the default)
Per case: no exception anywhere; cold == inductor (bitwise unless the case states a tolerance); each warm == cold
(bitwise); cold close to eager; the same Dynamo graphs and graph breaks as inductor, every graph counted once as a
hit, miss or bypass; the warm process meets the case's expectation (docs/guide/what-is-cached.md).

    .venv/bin/python -m pytest -q tests/python/soundness/test_adversarial.py -s      # prints the table
    .venv/bin/python tests/python/soundness/test_adversarial.py --table [--cases a,b] [--keep DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pass_runner
import pytest
import torch

from adversarial_cases import BY_NAME, CASES, Case, case_cache_dir, entry_files
from conftest import SUPPORT, frames_on

HERE = SUPPORT
PASS_TIMEOUT_S = 1500
# The first test pays for the passes of the module fixture (about 8-10 minutes on 2 cores).
pytestmark = pytest.mark.timeout(2 * PASS_TIMEOUT_S + 300)


# ---- running the passes ---------------------------------------------------------------------------------------------
WORKER = pass_runner.Worker(
    "adversarial_worker.py", "CASE", "case", PASS_TIMEOUT_S, lambda mode: ["--eager"] if mode == "inductor" else []
)


def _damage(case: Case, cache_root: Path) -> list[str]:
    """Flips bytes in the middle of, or truncates, every entry file the cold pass wrote for `case`."""
    done = []
    for path in entry_files(case_cache_dir(case.name, str(cache_root))):
        data = bytearray(path.read_bytes())
        if case.damage == "delete":
            path.unlink()
            done.append(path.name)
            continue
        if case.damage == "flip":
            mid = len(data) // 2
            data[mid : mid + 16] = bytes(b ^ 0xFF for b in data[mid : mid + 16])
        else:
            data = data[: len(data) // 2]
        path.write_bytes(bytes(data))
        done.append(path.name)
    return done


def run_passes(root: Path, names: list[str]) -> dict[str, Any]:
    """The three passes; the cases with `damage` have their entries damaged between the cold and warm passes."""

    def damage(cache: Path) -> dict[str, list[str]]:
        return {c.name: _damage(c, cache) for c in map(BY_NAME.get, names) if c.damage}

    return pass_runner.run_passes(root, names, WORKER, warm_processes=2, between=damage)


def load_passes(root: Path) -> dict[str, Any]:
    """The passes of an earlier run kept in `root` (--keep), to judge them again without running them."""
    seconds = json.loads((root / "seconds.json").read_text()) if (root / "seconds.json").exists() else {}
    return {
        "inductor": pass_runner.load_rows(root, "case", "inductor.jsonl"),
        "cold": pass_runner.load_rows(root, "case", "cold.jsonl"),
        **{
            label: pass_runner.load_rows(root, "case", f"{label}0.jsonl", f"{label}1.jsonl")
            for label in pass_runner.ALL_WARM_LABELS
            if (root / f"{label}0.jsonl").exists()
        },
        "out": root / "out",
        "between": {},
        "seconds": {"cold+inductor": seconds.get("cold+inductor", 0.0), "warm": seconds.get("warm", 0.0)},
    }


# ---- checks -------------------------------------------------------------------------------------------------------
def differences(a: Any, b: Any, tol: tuple[float, float] | None, path: str = "") -> list[str]:
    """Where `b` differs from `a`: bitwise when `tol` is None, else within (atol, rtol); non-tensors exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path or 'keys'}: {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], tol, f"{path}.{k}" if path else str(k))]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, tol, f"{path}[{i}]")]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return [f"{path}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"]
        if tol is None:
            same_nan = a.is_floating_point() and bool((a.isnan() == b.isnan()).all())
            if torch.equal(a, b) or (same_nan and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))):
                return []
        else:
            try:
                torch.testing.assert_close(b, a, atol=tol[0], rtol=tol[1], equal_nan=True)
                return []
            except AssertionError:
                pass
        if a.is_floating_point() or a.is_complex():
            wide = torch.complex128 if a.is_complex() else torch.float64
            diff = (a.to(wide) - b.to(wide)).abs().nan_to_num(float("inf"))
            return [f"{path}: max |diff| {diff.max().item():.3g} at {diff.argmax().item()} of {a.numel()}"]
        wrong = (a != b).flatten().nonzero().flatten()
        i = int(wrong[0])
        return [
            f"{path}: {wrong.numel()} of {a.numel()} elements differ, first at {i}: "
            f"{a.flatten()[i].item()!r} vs {b.flatten()[i].item()!r}"
        ]
    if isinstance(a, float) and isinstance(b, float) and tol is not None:
        return [] if abs(a - b) <= tol[0] + tol[1] * abs(a) else [f"{path}: {a!r} vs {b!r}"]
    if type(a) is not type(b) or a != b:
        return [f"{path}: {a!r} vs {b!r}"]
    return []


def _load(out: Path, name: str, label: str) -> Any:
    p = out / f"{name}.{label}.pt"
    return torch.load(p, weights_only=False) if p.exists() else None


def _internal_errors(row: dict) -> dict[str, int]:
    stats = row.get("stats", {})
    found = {k: v for k, v in row.get("error_kinds", {}).items() if "internal" in k}
    found.update({f"bypass.{k}": v for k, v in row.get("bypass_reasons", {}).items() if "internal" in k})
    for k, v in (stats.get("internal_errors") or {}).items():
        found[f"internal_errors.{k}"] = v
    return found


def _error_allowed(case: Case, label: str, kind: str) -> bool:
    allowed = list(case.errors_ok)
    if case.expect == ("bypass", "store_unavailable"):
        allowed.append("store_unavailable")
    if isinstance(case.expect, tuple) and case.expect[0] == "error" and label.startswith("warm"):
        allowed.append(case.expect[1])
    return any(kind.startswith(prefix) for prefix in allowed)


def counter_problems(case: Case, row: dict, reference: dict, label: str, may_miss: bool = False) -> list[str]:
    """What is wrong with the counters of the `label` (cold, warm or warm_noframes) process of `case`. `may_miss`: a
    warm process whose graphs need not all hit (see `judge`); everything else is checked as for any warm process."""
    if "exception" in row:
        return ["exception (see the exception check)"]
    p: list[str] = []
    warm = label.startswith("warm")
    h, m, b, e = row["hits"], row["misses"], row["bypasses"], row["errors"]
    # With frames on, a frame served from the frame cache is not traced: its graphs are counted by the frame cache
    # (frames.graphs) and its graph breaks are not seen again.
    frames = row.get("stats", {}).get("frames", {}) or {}
    graphs, breaks = row["dynamo"]["graphs"] + frames.get("graphs", 0), row["dynamo"]["graph_breaks"]
    ref = reference.get("dynamo")
    # A served frame may carry a more general graph than a fresh trace would make (a symbolic one another call of the
    # same code recorded, which Dynamo's own guards accept for this call too): fewer graphs, never more.
    if ref and graphs != ref["graphs"] and not (frames.get("hits") and graphs < ref["graphs"]):
        p.append(f"{graphs} graphs, inductor {ref['graphs']}")
    if ref and not frames.get("hits") and breaks != ref["graph_breaks"]:
        p.append(f"{breaks} graph breaks, inductor {ref['graph_breaks']}")
    if frames.get("internal_errors"):
        p.append(f"frame cache internal errors {frames}")
    if h + m + b != graphs:
        p.append(f"{graphs} graphs but {h} hits + {m} misses + {b} bypasses")
    internal = _internal_errors(row)
    if internal:
        p.append(f"internal errors {internal}")
    unexpected = {k: v for k, v in row["error_kinds"].items() if not _error_allowed(case, label, k)}
    if unexpected or (e and not row["error_kinds"]):
        p.append(f"errors {e} {row['error_kinds']}")
    reasons = row["bypass_reasons"]
    if case.expect == "hit":
        if b:
            p.append(f"bypassed {reasons}")
        if warm and not may_miss and (m or not h):
            p.append(f"{h} hits, {m} misses (expected every graph to hit)")
        if label == "cold" and not (h + m):
            p.append("nothing stored")
    elif case.expect[0] == "bypass":
        reason = case.expect[1]
        if not reasons.get(reason):
            p.append(f"expected bypass {reason}, saw {reasons or 'none'}")
        if set(reasons) - {reason}:
            p.append(f"other bypass reasons {reasons}")
        if warm and not may_miss and m:
            p.append(f"{m} misses")
    elif case.expect[0] == "miss":
        if b:
            p.append(f"bypassed {reasons}")
        if warm and (h or m != graphs):
            p.append(f"{h} hits, {m} misses (expected every graph to miss: {case.expect[1]})")
    elif case.expect[0] == "error":
        if b:
            p.append(f"bypassed {reasons}")
        if warm and not row["error_kinds"].get(case.expect[1]):
            p.append(f"error {case.expect[1]} not counted ({row['error_kinds']})")
        if warm and not m:
            p.append("not recompiled (0 misses)")
    for fact, value in case.facts.items():
        seen = row.get("facts", {}).get(fact)
        if seen != value:
            p.append(f"{fact} = {seen!r}, expected {value!r}")
    if case.warning and not any(case.warning in w for w in row.get("warnings", []) + row.get("py_warnings", [])):
        p.append(f"no warning mentioning {case.warning!r}")
    return p


@dataclasses.dataclass(repr=False)
class Verdict:
    case: Case
    rows: dict[str, dict]
    exceptions: list[str]
    cold_vs_inductor: list[str]
    warm_vs_cold: dict[str, list[str]]  # by warm pass
    cold_vs_eager: list[str]
    cold: list[str]
    warm: dict[str, list[str]]  # by warm pass (warm, warm_noframes)

    def __repr__(self) -> str:  # pytest prints the fixture's value on a failure: keep it short
        return f"Verdict({self.case.name}: {'ok' if self.ok else 'FAIL'})"

    @property
    def ok(self) -> bool:
        return not (
            self.exceptions
            or self.cold_vs_inductor
            or any(self.warm_vs_cold.values())
            or self.cold_vs_eager
            or self.cold
            or any(self.warm.values())
        )


def _compare(results: dict[str, Any], a: str, b: str, tol: tuple[float, float] | None) -> list[str]:
    if results[a] is None or results[b] is None:
        return [f"no results from {a if results[a] is None else b}"]
    return differences(results[a], results[b], tol)


def judge(passes: dict[str, Any], names: list[str]) -> dict[str, Verdict]:
    out = passes["out"]
    warm_labels = pass_runner.warm_labels_in(passes)
    verdicts = {}
    for name in names:
        case = BY_NAME[name]
        rows = {label: passes[label].get(name, {"exception": "no row"}) for label in ("inductor", "cold", *warm_labels)}
        exceptions = [f"{label}: {row['exception']}" for label, row in rows.items() if "exception" in row]
        if rows["inductor"].get("eager_exception"):
            exceptions.append(f"eager: {rows['inductor']['eager_exception']}")
        results = {label: _load(out, name, label) for label in ("inductor", "cold", *warm_labels, "eager")}
        # With frames on, the cold process may be served a frame another case recorded before it in the same process
        # (the cases share code: nn.Sequential.forward), with that case's graphs and automatic-dynamic state. It then
        # never compiles what a fresh frames-off process traces for this case, so warm_noframes may miss here (it
        # must still count every graph and give the cold results bitwise). Every other case must hit with frames off.
        served_in_cold = bool((rows["cold"].get("stats", {}).get("frames") or {}).get("hits"))

        eager = _compare(results, "eager", "cold", case.eager_tol) if case.eager_tol is not None else []
        verdicts[name] = Verdict(
            case,
            rows,
            exceptions,
            _compare(results, "inductor", "cold", case.tol),
            {label: _compare(results, "cold", label, None) for label in warm_labels},
            eager,
            counter_problems(case, rows["cold"], rows["inductor"], "cold"),
            {
                label: counter_problems(
                    case, rows[label], rows["inductor"], label, may_miss=label == "warm_noframes" and served_in_cold
                )
                for label in warm_labels
            },
        )
    return verdicts


# ---- the table ----------------------------------------------------------------------------------------------------
def _expect_text(case: Case) -> str:
    return case.expect if isinstance(case.expect, str) else f"{case.expect[0]} {case.expect[1]}"


def _seen(row: dict) -> str:
    if "hits" not in row:
        return "EXC"
    text = f"{row['hits']}/{row['misses']}/{row['bypasses']}/{row['errors']}"
    extra = list(row["bypass_reasons"]) + list(row["error_kinds"])
    return text + (f" ({', '.join(extra)})" if extra else "") + (" EXC" if "exception" in row else "")


def table(verdicts: dict[str, Verdict], passes: dict[str, Any]) -> str:
    labels = pass_runner.warm_labels_in(passes)
    lines = [
        f"| case | expected | cold h/m/b/e | {' | '.join(f'{x} h/m/b/e' for x in labels)} | cold=inductor "
        f"| {' | '.join(f'{x}=cold' for x in labels)} | result |",
        "|---|---|---|" + "---|" * len(labels) + "---|" + "---|" * len(labels) + "---|",
    ]
    for name, v in verdicts.items():
        problems = []
        if v.exceptions:
            problems.append(f"exception in {', '.join(x.split(':', 1)[0] for x in v.exceptions)}")
        if v.cold:
            problems.append("cold: " + "; ".join(v.cold))
        problems += [f"{label}: " + "; ".join(found) for label, found in v.warm.items() if found]
        if v.cold_vs_eager:
            problems.append(f"eager differs: {v.cold_vs_eager[0]}")
        lines.append(
            f"| {name} | {_expect_text(v.case)} | {_seen(v.rows['cold'])} | "
            f"{' | '.join(_seen(v.rows[x]) for x in labels)} | {'yes' if not v.cold_vs_inductor else 'NO'} | "
            f"{' | '.join('yes' if not v.warm_vs_cold[x] else 'NO' for x in labels)} | "
            f"{'ok' if v.ok else 'FAIL: ' + ' / '.join(problems or ['values differ'])} |"
        )
    failed = sum(not v.ok for v in verdicts.values())
    s = passes["seconds"]
    lines.append(
        f"\n{len(verdicts) - failed} of {len(verdicts)} cases ok; passes: cold+inductor {s['cold+inductor']:.0f}s, "
        f"warm {s['warm']:.0f}s"
    )
    return "\n".join(lines)


def details(verdicts: dict[str, Verdict]) -> str:
    """Every failing case's symptoms in full: exceptions, differing values, counters."""
    parts = []
    for name, v in verdicts.items():
        if v.ok:
            continue
        parts.append(f"== {name} (expected {_expect_text(v.case)})")
        parts += [f"  exception {x[:1500]}" for x in v.exceptions]
        parts += [f"  cold vs inductor: {d}" for d in v.cold_vs_inductor[:6]]
        parts += [f"  {label} vs cold: {d}" for label, found in v.warm_vs_cold.items() for d in found[:6]]
        parts += [f"  cold vs eager: {d}" for d in v.cold_vs_eager[:6]]
        parts += [f"  cold: {d}" for d in v.cold] + [f"  {label}: {d}" for label, fs in v.warm.items() for d in fs]
        for label in ("cold", *v.warm):
            for w in v.rows[label].get("warnings", [])[:3]:
                parts.append(f"  {label} warning: {w[:600]}")
    return "\n".join(parts)


# ---- pytest -------------------------------------------------------------------------------------------------------
NAMES = [c.name for c in CASES]


@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("adversarial")
    return root, run_passes(root, NAMES)


def test_loaded_guards_are_a_fresh_traces(passes):
    """Every guard set a warm process loaded from a frame entry equals one Dynamo built tracing the same code in the
    cold process (source by source, kind by kind; a content guard under the identity guard it replaced)."""
    if not frames_on():
        pytest.skip("frames off (AOTCACHE_FRAMES=0): no frame is served, no guard set loaded")
    pass_runner.check_loaded_guards(passes[1], min_loaded=len(NAMES) // 2)


@pytest.fixture(scope="module")
def verdicts(passes) -> dict[str, Verdict]:
    root, passes = passes
    result = judge(passes, NAMES)
    text = table(result, passes) + "\n\n" + details(result)
    (root / "table.md").write_text(text + "\n")
    print(f"\n{text}\n(table: {root / 'table.md'})")
    return result


@pytest.mark.parametrize("name", NAMES)
def test_no_exception(verdicts, name):
    assert not verdicts[name].exceptions, "\n".join(verdicts[name].exceptions)


@pytest.mark.parametrize("name", NAMES)
def test_cold_equals_inductor(verdicts, name):
    assert not verdicts[name].cold_vs_inductor, verdicts[name].cold_vs_inductor


@pytest.mark.parametrize("label", pass_runner.warm_labels())
@pytest.mark.parametrize("name", NAMES)
def test_warm_equals_cold_bitwise(verdicts, name, label):
    assert not verdicts[name].warm_vs_cold[label], verdicts[name].warm_vs_cold[label]


@pytest.mark.parametrize("name", [c.name for c in CASES if c.eager_tol is not None])
def test_cold_close_to_eager(verdicts, name):
    assert not verdicts[name].cold_vs_eager, verdicts[name].cold_vs_eager


@pytest.mark.parametrize("name", NAMES)
def test_cold_counts_every_graph(verdicts, name):
    assert not verdicts[name].cold, (verdicts[name].cold, verdicts[name].rows["cold"].get("warnings"))


@pytest.mark.parametrize("label", pass_runner.warm_labels())
@pytest.mark.parametrize("name", NAMES)
def test_warm_meets_expectation(verdicts, name, label):
    assert not verdicts[name].warm[label], (verdicts[name].warm[label], verdicts[name].rows[label].get("warnings"))


def test_the_suite_is_large_enough():
    assert len(CASES) >= 40


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="store_true", help="print the table (the default; kept for clarity)")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--keep", help="run in this directory and keep it (default: a temporary one)")
    parser.add_argument("--judge", help="do not run: judge again the passes kept in this directory by --keep")
    args = parser.parse_args()
    names = args.cases.split(",") if args.cases else NAMES
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown cases: {unknown}")
    with tempfile.TemporaryDirectory(prefix="aotcache-adversarial-") as tmp:
        root = Path(args.judge or args.keep or tmp)
        passes = load_passes(root) if args.judge else run_passes(root, names)
        if args.judge and not args.cases:
            names = [n for n in NAMES if n in passes["cold"]]
        result = judge(passes, names)
        text = table(result, passes) + "\n\n" + details(result)
        (root / "table.md").write_text(text + "\n")
        print(text)
    return 0 if all(v.ok for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
