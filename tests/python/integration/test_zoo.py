"""The model zoo (zoo_models.py) under aotcache and under uncached backend="inductor", fresh processes.

Passes over the selected items (zoo_worker.py, several items per process):
  inductor  backend "inductor", torch's own caches off                    } concurrently
  cold      backend "aotcache" on an empty AOTCACHE_DIR                   }
  warm      backend "aotcache" on the cold pass's directory, one process, the items in the cold pass's order
  warm_noframes   the same with the frame cache off, on a copy of that directory (when frames are on: the default)
Per item: no exception in any pass; the cold and warm processes count every Dynamo graph once (hit, miss or bypass),
no errors, no internal errors, bypasses only with a documented reason (docs/guide/what-is-cached.md); each
warm: no miss (every graph hits or bypasses), == cold bitwise; cold == inductor bitwise (generated tokens equal).

Items: AOTCACHE_ZOO (unset or `ci`: zoo_models.CI_ITEMS, what `make test` and CI run, 3-6 minutes on 2 cores; `off`:
the passes are skipped; `all`: every item, `make zoo`, about 20 minutes; or a list such as
`gpt2,t5:train,generate`, see zoo_models.parse_items).

    AOTCACHE_ZOO=all .venv/bin/python -m pytest -q -s tests/python/integration/test_zoo.py     # prints the table
    .venv/bin/python tests/python/integration/test_zoo.py --items llama:train --keep /tmp/zoo   # without pytest
    (exit status 1 on a failure)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import pass_runner
import pytest
import torch

import zoo_models
from conftest import SUPPORT, frames_on

HERE = SUPPORT
# `make test` (CI) runs the CI subset; `make zoo` all of it; AOTCACHE_ZOO=off skips the passes. The checks of the
# judge and of bench/zoo.py's arithmetic (no processes, under a second) run either way.
needs_zoo = pytest.mark.skipif(os.environ.get("AOTCACHE_ZOO") == "off", reason="AOTCACHE_ZOO=off")
ITEMS = zoo_models.parse_items(os.environ.get("AOTCACHE_ZOO") if os.environ.get("AOTCACHE_ZOO") != "off" else None)
ITEM_TIMEOUT_S = 600


def pass_timeout_s(items: list[str]) -> int:
    """A process running `items` is killed after this (each item also has ITEM_TIMEOUT_S in the worker)."""
    return 300 + 240 * len(items)


# The first test pays for the passes of the module fixture.
pytestmark = pytest.mark.timeout(2 * pass_timeout_s(ITEMS) + 300)

# The table of docs/guide/what-is-cached.md: a bypass with any other reason fails the item.
DOCUMENTED_BYPASSES = {
    "python_function",
    "custom_op_unpinned",
    "checkpoint_policy_unhashable",
    "higher_order_op_unknown",
    "call_module_unknown_type",
    "dynamic_shapes",
    "aliased_state",
    "freezing",
    "tensor_subclass",
    "unsupported_input",
    "unencodable_value",
    "unencodable_config",
    "custom_pass",
    "not_serializable",
}
# docs/design/frame-cache.md: the frames a warm process may trace again, by reason; any other reason, or a warm frame
# traced without one, fails the item.
DOCUMENTED_FRAME_BYPASSES = {"optimizer_step", "no_code"}


# ---- running the passes ---------------------------------------------------------------------------------------------
def run_passes(root: Path, items: list[str]) -> dict[str, Any]:
    """The three passes. One warm process runs the items in the cold process's order: Dynamo guards some of the
    Python state the items before leave behind (Hugging Face's registry of output recorders, by position), and a
    frame recorded after other items holds only after the same items (another order traces the frame again:
    frames.miss.guards_failed, which the frame cases show; here every frame must be served)."""
    worker = pass_runner.Worker(
        "zoo_worker.py", "ZOO", "item", pass_timeout_s(items), lambda mode: ["--timeout", str(ITEM_TIMEOUT_S)]
    )
    return pass_runner.run_passes(root, items, worker, warm_processes=1)


# ---- checks -------------------------------------------------------------------------------------------------------
def differences(a: dict | None, b: dict | None) -> list[str]:
    """Where the tensors of `b` are not bitwise those of `a` (NaNs equal where both have them)."""
    if a is None or b is None:
        return ["no results"]
    if a.keys() != b.keys():
        return [f"keys differ: {sorted(set(a) ^ set(b))}"]
    found = []
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            found.append(f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        elif not torch.equal(x, y) and not (
            x.is_floating_point() and torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(), y.nan_to_num())
        ):
            if x.is_floating_point():
                found.append(f"{k}: max |diff| {(x.double() - y.double()).abs().max().item():.3g}")
            else:
                found.append(
                    f"{k}: {int((x != y).sum())} of {x.numel()} elements differ ({x.tolist()} vs {y.tolist()})"
                )
    return found


def frame_adjusted(row: dict) -> tuple[int, int, dict]:
    """(graphs, graph breaks, frame counters) of a process: with frames on (AOTCACHE_FRAMES=1) a frame served from
    the frame cache is not traced, so its graphs are counted by the frame cache (frames.graphs) instead of Dynamo,
    and its graph breaks are not seen again."""
    frames = row.get("stats", {}).get("frames", {}) or {}
    return row["dynamo"]["graphs"] + frames.get("graphs", 0), row["dynamo"]["graph_breaks"], frames


def counter_problems(row: dict, reference: dict, label: str) -> list[str]:
    """What is wrong with the counters of the `label` (cold, warm or warm_noframes) aotcache process of an item."""
    if "exception" in row:
        return ["exception"]
    p = []
    warm = label.startswith("warm")
    h, m, b = row["hits"], row["misses"], row["bypasses"]
    graphs, breaks, frames = frame_adjusted(row)
    ref = reference.get("dynamo")
    # A served frame may carry a more general graph than a fresh trace would make (a symbolic one another call of the
    # same code recorded, which Dynamo's own guards accept for this call too): fewer graphs, never more.
    if ref and graphs != ref["graphs"] and not (frames.get("hits") and graphs < ref["graphs"]):
        p.append(f"{graphs} graphs, inductor {ref['graphs']}")
    if ref and not frames.get("hits") and breaks != ref["graph_breaks"]:
        p.append(f"{breaks} graph breaks, inductor {ref['graph_breaks']}")
    if frames.get("internal_errors"):
        p.append(f"frame cache internal errors: {frames}")
    if h + m + b != graphs:
        p.append(f"{graphs} graphs but {h} hits + {m} misses + {b} bypasses")
    if row["errors"] or row["error_kinds"]:
        p.append(f"errors {row['errors']} {row['error_kinds']}")
    if row["internal_errors"]:
        p.append(f"internal errors {row['internal_errors']}")
    undocumented = set(row["bypass_reasons"]) - DOCUMENTED_BYPASSES
    if undocumented:
        p.append(f"bypass reasons not documented: {sorted(undocumented)}")
    if warm and m:
        p.append(f"{m} misses (expected every graph to hit or bypass) {row['miss_reasons']}")
    frame_reasons = {k.split(".", 1)[1] for k in frames if k.startswith("bypass.")}
    if frame_reasons - DOCUMENTED_FRAME_BYPASSES:
        p.append(f"frame bypass reasons not documented: {sorted(frame_reasons - DOCUMENTED_FRAME_BYPASSES)}")
    # Warm: every frame is served (the warm process runs the items in the cold one's order, so the Python state
    # Dynamo guards is the same), or not frame-cacheable for a documented reason (it misses, traces, bypasses).
    misses = {k: v for k, v in frames.items() if k.startswith("miss.")}
    unexplained = misses.get("miss.no_entry", 0) > frames.get("bypasses", 0)
    if warm and (unexplained or set(misses) - {"miss.no_entry"}):
        p.append(f"{frames['misses']} frames traced, {frames.get('bypasses', 0)} not frame-cacheable {misses}")
    return p


@dataclasses.dataclass(repr=False)
class Verdict:
    item: str
    rows: dict[str, dict]
    exceptions: list[str]
    warm_vs_cold: dict[str, list[str]]  # by warm pass (warm, warm_noframes)
    cold_vs_inductor: list[str]
    cold: list[str]
    warm: dict[str, list[str]]  # by warm pass

    def __repr__(self) -> str:  # pytest prints the fixture's value on a failure: keep it short
        return f"Verdict({self.item}: {'ok' if self.ok else 'FAIL'})"

    @property
    def ok(self) -> bool:
        return not (
            self.exceptions
            or any(self.warm_vs_cold.values())
            or self.cold_vs_inductor
            or self.cold
            or any(self.warm.values())
        )


def judge(passes: dict[str, Any], items: list[str]) -> dict[str, Verdict]:
    warm_labels = pass_runner.warm_labels_in(passes)
    verdicts = {}
    for item in items:
        rows = {label: passes[label].get(item, {"exception": "no row"}) for label in ("inductor", "cold", *warm_labels)}
        model, workload = item.split(":")
        results = {}
        for label in rows:
            path = passes["out"] / f"{model}.{workload}.{label}.pt"
            results[label] = torch.load(path) if path.exists() and "exception" not in rows[label] else None
        verdicts[item] = Verdict(
            item,
            rows,
            [f"{label}: {row['exception']}" for label, row in rows.items() if "exception" in row],
            {label: differences(results["cold"], results[label]) for label in warm_labels},
            differences(results["inductor"], results["cold"]),
            counter_problems(rows["cold"], rows["inductor"], "cold"),
            {label: counter_problems(rows[label], rows["inductor"], label) for label in warm_labels},
        )
    return verdicts


# ---- the table ----------------------------------------------------------------------------------------------------
def _counts(row: dict) -> str:
    if "hits" not in row:
        return "EXC"
    text = f"{row['hits']}/{row['misses']}/{row['bypasses']}"
    return text + (f" ({', '.join(row['bypass_reasons'])})" if row["bypass_reasons"] else "")


def _frame_counts(row: dict) -> str:
    """Frames served from the frame cache / traced after a lookup / not frame-cacheable (reasons); "-": frames off."""
    f = row.get("stats", {}).get("frames", {}) or {}
    if not f:
        return "-"
    reasons = sorted(k.split(".", 1)[1] for k in f if k.startswith("bypass."))
    return f"{f.get('hits', 0)}/{f.get('misses', 0)}/{f.get('bypasses', 0)}" + (
        f" ({', '.join(reasons)})" if reasons else ""
    )


def _seconds(row: dict) -> str:
    return f"{row['first_result_s']:.1f}" if row.get("first_result_s") else "-"


def table(verdicts: dict[str, Verdict], passes: dict[str, Any]) -> str:
    lines = [
        "| model | workload | warm hits (h/m/b) | warm frames (h/m/b) | warm, frames off (h/m/b) | cold hits (h/m/b) "
        "| bitwise (warm=cold=inductor) | cold s | warm s | warm, frames off s | inductor s | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for item, v in verdicts.items():
        model, workload = item.split(":")
        problems = [f"exception in {', '.join(x.split(':', 1)[0] for x in v.exceptions)}"] if v.exceptions else []
        problems += ["cold: " + "; ".join(v.cold)] if v.cold else []
        problems += [f"{label}: " + "; ".join(found) for label, found in v.warm.items() if found]
        problems += [f"{label} != cold" for label, found in v.warm_vs_cold.items() if found]
        problems += ["cold != inductor"] if v.cold_vs_inductor else []
        bitwise = "yes" if not (any(v.warm_vs_cold.values()) or v.cold_vs_inductor) else "NO"
        r = v.rows
        off = r.get("warm_noframes", {})
        lines.append(
            f"| {model} | {workload} | {_counts(r['warm'])} | {_frame_counts(r['warm'])} | "
            f"{_counts(off) if off else '-'} | {_counts(r['cold'])} | {bitwise} | "
            f"{_seconds(r['cold'])} | {_seconds(r['warm'])} | {_seconds(off)} | {_seconds(r['inductor'])} | "
            f"{'ok' if v.ok else 'FAIL: ' + ' / '.join(problems)} |"
        )
    failed = sum(not v.ok for v in verdicts.values())
    s = passes["seconds"]
    lines.append(
        f"\n{len(verdicts) - failed} of {len(verdicts)} items ok; cold s / warm s / inductor s: compile + first "
        f"result of the item; passes: cold+inductor {s['cold+inductor']:.0f}s, warm {s['warm']:.0f}s (wall)"
    )
    return "\n".join(lines)


def details(verdicts: dict[str, Verdict]) -> str:
    """Every failing item's symptoms in full: exceptions, differing values, counters, aotcache's warnings."""
    parts = []
    for item, v in verdicts.items():
        if v.ok:
            continue
        parts.append(f"== {item}")
        parts += [f"  exception {x[:1500]}" for x in v.exceptions]
        parts += [f"  {label} vs cold: {d}" for label, found in v.warm_vs_cold.items() for d in found[:6]]
        parts += [f"  cold vs inductor: {d}" for d in v.cold_vs_inductor[:6]]
        parts += [f"  cold: {d}" for d in v.cold] + [f"  {label}: {d}" for label, fs in v.warm.items() for d in fs]
        for label in ("cold", *v.warm):
            for w in v.rows[label].get("warnings", [])[:3]:
                parts.append(f"  {label} warning: {w[:600]}")
    return "\n".join(parts)


def report(root: Path, passes: dict[str, Any], items: list[str]) -> tuple[dict[str, Verdict], str]:
    verdicts = judge(passes, items)
    text = table(verdicts, passes) + "\n\n" + details(verdicts)
    (root / "table.md").write_text(text + "\n")
    return verdicts, text


# ---- pytest -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("zoo")
    return root, run_passes(root, ITEMS)


@pytest.fixture(scope="module")
def verdicts(passes) -> dict[str, Verdict]:
    root, run = passes
    result, text = report(root, run, ITEMS)
    print(f"\n{text}\n(table: {root / 'table.md'})")
    return result


@needs_zoo
def test_loaded_guards_are_a_fresh_traces(passes):
    """Every guard set a warm process loaded from a frame entry equals one Dynamo built tracing the same code in the
    cold process (source by source, kind by kind; a content guard under the identity guard it replaced)."""
    if not frames_on():
        pytest.skip("frames off (AOTCACHE_FRAMES=0): no frame is served, no guard set loaded")
    pass_runner.check_loaded_guards(passes[1], min_loaded=1)


@needs_zoo
@pytest.mark.parametrize("item", ITEMS)
def test_no_exception(verdicts, item):
    assert not verdicts[item].exceptions, "\n".join(verdicts[item].exceptions)


@needs_zoo
@pytest.mark.parametrize("item", ITEMS)
def test_cold_counts_every_graph(verdicts, item):
    assert not verdicts[item].cold, (verdicts[item].cold, verdicts[item].rows["cold"].get("warnings"))


@needs_zoo
@pytest.mark.parametrize("label", pass_runner.warm_labels())
@pytest.mark.parametrize("item", ITEMS)
def test_warm_hits_every_graph(verdicts, item, label):
    assert not verdicts[item].warm[label], (verdicts[item].warm[label], verdicts[item].rows[label].get("warnings"))


@needs_zoo
@pytest.mark.parametrize("label", pass_runner.warm_labels())
@pytest.mark.parametrize("item", ITEMS)
def test_warm_equals_cold_bitwise(verdicts, item, label):
    assert not verdicts[item].warm_vs_cold[label], verdicts[item].warm_vs_cold[label]


@needs_zoo
@pytest.mark.parametrize("item", ITEMS)
def test_aotcache_equals_inductor_bitwise(verdicts, item):
    assert not verdicts[item].cold_vs_inductor, verdicts[item].cold_vs_inductor


def test_item_selection():
    assert zoo_models.parse_items(None) == zoo_models.parse_items("ci") == list(zoo_models.CI_ITEMS)
    assert zoo_models.parse_items("all") == list(zoo_models.ITEMS)
    assert zoo_models.parse_items("t5:train,gpt2") == ["t5:train", "gpt2:train", "gpt2:infer", "gpt2:adamw"] + [
        "gpt2:generate"
    ]
    assert zoo_models.parse_items("generate") == ["gpt2:generate", "llama:generate", "t5:generate", "whisper:generate"]
    assert len(zoo_models.ITEMS) == 22
    with pytest.raises(ValueError, match="unknown zoo item"):
        zoo_models.parse_items("vit:generate")


def _row(**kw: Any) -> dict:
    row = {"hits": 2, "misses": 0, "bypasses": 0, "errors": 0, "dynamo": {"graphs": 2, "graph_breaks": 1}}
    row.update({k: {} for k in ("bypass_reasons", "error_kinds", "internal_errors", "miss_reasons")})
    row.update(kw)
    return row


def test_checks_can_fail():
    """The judge's checks on synthetic rows and tensors (no processes): each problem is named."""
    t = torch.arange(4.0)
    assert differences({"a": t}, {"a": t.clone()}) == []
    assert differences({"a": t * float("nan")}, {"a": t * float("nan")}) == []
    assert differences({"a": t}, {"a": t + 0.5}) == ["a: max |diff| 0.5"]
    assert differences({"tokens": torch.tensor([1, 2])}, {"tokens": torch.tensor([1, 3])}) == [
        "tokens: 1 of 2 elements differ ([1, 2] vs [1, 3])"
    ]
    assert differences({"a": t}, None) == ["no results"]
    ref = {"dynamo": {"graphs": 2, "graph_breaks": 1}}
    assert counter_problems(_row(), ref, "warm") == []
    assert counter_problems(_row(hits=1, misses=1, miss_reasons={"inputs": 1}), ref, "warm") == [
        "1 misses (expected every graph to hit or bypass) {'inputs': 1}"
    ]
    assert counter_problems(_row(hits=0, misses=2), ref, "cold") == []
    assert counter_problems(_row(hits=1), ref, "warm") == ["2 graphs but 1 hits + 0 misses + 0 bypasses"]
    assert counter_problems(_row(hits=1, bypasses=1, bypass_reasons={"surprise": 1}), ref, "warm") == [
        "bypass reasons not documented: ['surprise']"
    ]
    assert counter_problems(_row(hits=1, bypasses=1, bypass_reasons={"dynamic_shapes": 1}), ref, "warm") == []
    assert counter_problems(_row(internal_errors={"load": 1}), ref, "warm") == ["internal errors {'load': 1}"]
    assert counter_problems(_row(), {"dynamo": {"graphs": 3, "graph_breaks": 1}}, "cold") == ["2 graphs, inductor 3"]
    assert counter_problems(_row(), {"dynamo": {"graphs": 2, "graph_breaks": 0}}, "cold") == [
        "1 graph breaks, inductor 0"
    ]
    # A frame served by the frame cache is not traced: its graphs count through frames.graphs, its breaks are unseen.
    served = _row(hits=2, dynamo={"graphs": 0, "graph_breaks": 0}, stats={"frames": {"hits": 1, "graphs": 2}})
    assert counter_problems(served, ref, "warm") == []
    frames = {"hits": 1, "graphs": 2, "internal_errors": {"x": 1}}
    broken = _row(dynamo={"graphs": 0, "graph_breaks": 0}, stats={"frames": frames})
    assert counter_problems(broken, ref, "warm") == [f"frame cache internal errors: {frames}"]
    # Served frames may carry fewer (more general) graphs than a fresh trace, never more.
    more = _row(hits=3, dynamo={"graphs": 0, "graph_breaks": 0}, stats={"frames": {"hits": 1, "graphs": 3}})
    assert counter_problems(more, ref, "warm") == ["3 graphs, inductor 2"]

    # Warm: every frame is served, or not frame-cacheable for a documented reason.
    def warm_frames(label: str = "warm", **frames: int) -> list[str]:
        frames = {k.replace("__", "."): v for k, v in frames.items()}
        return counter_problems(_row(dynamo={"graphs": 1, "graph_breaks": 1}, stats={"frames": frames}), ref, label)

    assert warm_frames(hits=1, graphs=1, misses=1, miss__no_entry=1, bypasses=1, bypass__optimizer_step=1) == []
    assert warm_frames(hits=1, graphs=1, misses=1, miss__guards_failed=1) == [
        "1 frames traced, 0 not frame-cacheable {'miss.guards_failed': 1}"
    ]
    assert warm_frames(hits=1, graphs=1, misses=1, miss__no_entry=1) == [
        "1 frames traced, 0 not frame-cacheable {'miss.no_entry': 1}"
    ]
    assert warm_frames(hits=1, graphs=1, misses=1, miss__sources_changed=1) == [
        "1 frames traced, 0 not frame-cacheable {'miss.sources_changed': 1}"
    ]
    assert warm_frames("cold", hits=1, graphs=1, misses=1, bypasses=1, bypass__guards_reject_call=1) == [
        "frame bypass reasons not documented: ['guards_reject_call']"
    ]


def test_bench_summary_arithmetic():
    """bench/zoo.py's medians, ratios, Dynamo share and hit verdicts on synthetic worker rows."""
    sys.path.insert(0, str(HERE.parents[1] / "bench"))
    import zoo as bench_zoo  # bench/zoo.py

    def run(mode: str, rep: int, first: float, **kw: Any) -> dict:
        aot = mode.startswith(("aotcache", "frames"))
        phases = {"tracing_s": 1.0, "guards_s": 0.2, "dynamo_other_s": 0.3, "dynamo_s": 1.5, "backend_s": 1.0}
        phases.update(run_s=first - 2.5, **({"key_s": 0.1, "lookup_s": 0.0, "load_s": 0.5} if aot else {}))
        if mode == "frames_warm":  # every frame served: no Dynamo, no backend call
            phases = {"tracing_s": 0.0, "guards_s": 0.0, "dynamo_other_s": 0.0, "dynamo_s": 0.0, "backend_s": 0.0}
            phases.update(run_s=first - 0.4, frame_load_s=0.4, frame_hits=3)
        row = {"mode": mode, "rep": rep, "first_result_s": first, "process_wall_s": first + 5, "phases": phases}
        row.update(backend="aotcache" if aot else "inductor", dynamo={"graphs": 2}, torch_counters={})
        row.update(hits=0, misses=0, bypasses=0, errors=0, bypass_reasons={})
        row.update(kw)
        return row

    runs = []
    for rep, (warm_torch, warm_aot) in enumerate(((5.0, 3.0), (7.0, 4.0))):
        runs += [
            run("torch_cold", rep, 40.0),
            run("torch_warm", rep, warm_torch, torch_counters={"autograd_cache_hit": 2, "fxgraph_cache_hit": 4}),
            run("aotcache_cold", rep, 42.0, misses=2),
            run("aotcache_warm", rep, warm_aot, hits=2 - rep, misses=rep),
            run("frames_warm", rep, warm_aot / 2, hits=2),
        ]
    s = bench_zoo.summarize_item("gpt2:train", runs)
    assert s["modes"]["torch_warm"]["first_result_s"]["median"] == 6.0
    assert s["ratios"]["warm_aotcache_over_warm_torch"] == pytest.approx(3.5 / 6.0)
    assert s["ratios"]["warm_aotcache_over_warm_torch_pairs"] == pytest.approx([3.0 / 5.0, 4.0 / 7.0])
    assert s["ratios"]["cold_aotcache_over_warm_aotcache"] == pytest.approx(42.0 / 3.5)
    assert s["dynamo_share_warm"]["aotcache_warm"] == pytest.approx(statistics.median([1.5 / 3.0, 1.5 / 4.0]))
    b = s["modes"]["aotcache_warm"]["breakdown_median_s"]
    assert b["backend_rest_s"] == pytest.approx(0.4) and b["load_s"] == 0.5
    assert s["modes"]["torch_warm"]["breakdown_median_s"]["backend_rest_s"] == 1.0
    assert s["warm_all_hit"] == {"torch_warm": True, "aotcache_warm": False, "frames_warm": True}  # rep 1 missed
    assert s["ratios"]["warm_frames_over_warm_torch"] == pytest.approx(1.75 / 6.0)
    assert s["ratios"]["cold_aotcache_over_warm_frames"] == pytest.approx(42.0 / 1.75)
    assert s["frame_hits"] == [3, 3] and s["dynamo_share_warm"]["frames_warm"] == 0.0
    assert s["modes"]["frames_warm"]["breakdown_median_s"]["frame_load_s"] == 0.4
    text = bench_zoo.markdown(
        {
            "machine": {"date": "2026-12-03T00:00:00", "nproc": 2, "cpu_model": "cpu", "platform": "linux"}
            | {"python": "3.11", "torch": "2.13.0", "aotcache": "0.1.0"},
            "transformers": "5.23.0",
            "loadavg": [1.0, 2.0],
            "command": "bench/zoo.py",
            "wall_s": 60.0,
            "items": [s],
        }
    )
    assert "| gpt2:train | 2 | 40.00 (40.00-40.00) | 6.00 (5.00-7.00) |" in text
    # Ratios, then the Dynamo shares (medians of 1.5/5, 1.5/7; 1.5/3, 1.5/4; none with frames), frame hits, verdicts.
    assert "| 0.58x | 0.29x | 24.0x | 26% / 44% / 0% | 3, 3 | yes / NO / yes | yes |" in text, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", help="AOTCACHE_ZOO-style selection (default: AOTCACHE_ZOO, else the CI subset)")
    parser.add_argument("--keep", help="run in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()
    items = zoo_models.parse_items(args.items) if args.items else ITEMS
    with tempfile.TemporaryDirectory(prefix="aotcache-zoo-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        verdicts, text = report(root, run_passes(root, items), items)
        print(text)
    return 0 if all(v.ok for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
