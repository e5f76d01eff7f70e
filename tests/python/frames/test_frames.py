"""The frame cache across fresh processes (frame_cases.py, run by frames_worker.py), frames on (AOTCACHE_FRAMES=1).

Passes, on one cache directory:
  inductor          backend "inductor", torch's caches off: the reference          } concurrently
  cold              aotcache, empty cache: every frame recorded                     }
  warm              aotcache: every frame served from the frame cache, Dynamo compiles no graph
  inductor-variant  the reference of the variant (helpers v2, changed globals, closures, patches, configs) } conc.
  warm-variant      aotcache on the cold cache with the variant: results equal the reference's, and the cases
                    whose change a stale frame would miss trace again (frame_cases.MUST_RETRACE)
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.modules.setdefault("frame_helpers", __import__("frame_helpers_v1"))  # frame_cases imports it; workers get theirs
import frame_cases  # noqa: E402

from conftest import SUPPORT, cli, graph_keys, loaded_guards_unmatched  # noqa: E402

HERE = SUPPORT
CASES = list(frame_cases.CASES)
FAULT_PHASES = ("key", "load", "record")
FAULT_CASES = ["mlp_train", "graph_break", "automatic_dynamic"]
pytestmark = pytest.mark.timeout(1500)


def _run(
    tmp: Path,
    name: str,
    backend: str,
    helpers: str,
    cache: Path,
    variant: bool = False,
    frames: bool = True,
    fault: str | None = None,
    cases: list[str] = CASES,
) -> dict[str, dict]:
    work = tmp / name
    (work / "mod").mkdir(parents=True)
    shutil.copy(HERE / f"frame_helpers_{helpers}.py", work / "mod" / "frame_helpers.py")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(work / "mod"), str(HERE), os.environ.get("PYTHONPATH", "")]),
        "FRAME_CASES_BACKEND": backend,
        "AOTCACHE_DIR": str(cache),
        # One kernel directory for every pass, as on one machine: a kernel is built once (the passes' compiled code
        # is the same whoever built it); warm processes find their kernels there or in the entries.
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"),
        "AOTCACHE_FRAMES": "1" if frames else "0",
        "AOTCACHE_FRAMES_GUARD_LOG": str(tmp / f"guards-{name}.jsonl"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
        "PYTHONHASHSEED": "0",
    }
    flags = [*(["--variant"] if variant else []), *(["--fault", fault] if fault else [])]
    args = [sys.executable, str(HERE / "frames_worker.py"), str(work), *flags, *cases]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1200)
    rows = {}
    for line in proc.stdout.splitlines():
        if line.startswith("FRAME "):
            row = json.loads(line[6:])
            row["result"] = work / f"{row['case']}.pt"
            rows[row["case"]] = row
    assert rows.keys() == set(cases), (
        f"{name}: worker exited {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-5000:]}"
    )
    return rows


@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> dict[str, dict[str, dict]]:
    tmp = tmp_path_factory.mktemp("frames")
    cache = tmp / "cache"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ref = pool.submit(_run, tmp, "inductor", "inductor", "v1", tmp / "unused1")
        cold = pool.submit(_run, tmp, "cold", "aotcache", "v1", cache)
        out = {"inductor": ref.result(), "cold": cold.result()}
        shutil.copytree(cache, tmp / "cache-aged")  # what the cold pass wrote, and nothing else (see "aged" below)
        warm = pool.submit(_run, tmp, "warm", "aotcache", "v1", cache)
        ref_v = pool.submit(_run, tmp, "inductor-variant", "inductor", "v2", tmp / "unused2", True)
        out["warm"], out["inductor-variant"] = warm.result(), ref_v.result()
        warm_v = pool.submit(_run, tmp, "warm-variant", "aotcache", "v2", cache, True)
        fresh = pool.submit(_run, tmp, "fresh", "aotcache", "v1", cache, False, False)
        out["warm-variant"], out["fresh"] = warm_v.result(), fresh.result()
        # A fault in each phase of the frame cache, on a copy of the warm cache: traced as if frames were off.
        faults = {}
        for phase in FAULT_PHASES:  # a record fault needs a miss: an empty cache
            if phase != "record":
                shutil.copytree(cache, tmp / f"cache-{phase}")
            faults[phase] = pool.submit(
                _run, tmp, f"fault-{phase}", "aotcache", "v1", tmp / f"cache-{phase}", fault=phase, cases=FAULT_CASES
            )
        out["faults"] = {phase: f.result() for phase, f in faults.items()}
        # The graph entries evicted, the frame entries kept: each frame's graph is gone, so the frame must not serve.
        evicted = tmp / "cache-evicted"
        shutil.copytree(cache, evicted)
        for key in graph_keys(evicted):
            (evicted / "entries" / key[:2] / f"{key}.aotc").unlink()
        out["evicted"] = _run(tmp, "evicted", "aotcache", "v1", evicted, cases=FAULT_CASES)
        # Every entry an hour old: a warm process that serves symbolic graphs through frames must mark their guard
        # indexes used too, or eviction (oldest first) removes the index and keeps the graph.
        aged = tmp / "cache-aged"
        hour_ago = time.time() - 3600
        for path in (aged / "entries").rglob("*.aotc"):
            os.utime(path, (hour_ago, hour_ago))
        out["aged_at"] = time.time()
        out["aged"] = _run(tmp, "aged", "aotcache", "v1", aged)
        out["aged_cache"] = aged
    out["cache"] = cache
    out["guard_logs"] = {name: tmp / f"guards-{name}.jsonl" for name in ("warm", "fresh")}
    return out


def _equal(a: Path, b: Path) -> bool:
    x, y = torch.load(a), torch.load(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def _frames(row: dict) -> dict:
    return row["stats"].get("frames", {})


@pytest.mark.parametrize("case", CASES)
def test_no_exception(passes, case):
    for name, rows in passes.items():
        if name in ("cache", "guard_logs", "faults", "evicted", "aged", "aged_at", "aged_cache"):
            continue
        assert "exception" not in rows[case], f"{name}: {rows[case].get('traceback')}"
        assert not _frames(rows[case]).get("internal_errors"), f"{name}: {_frames(rows[case])}"


@pytest.mark.parametrize("case", CASES)
def test_cold_records_every_frame(passes, case):
    frames = _frames(passes["cold"][case])
    assert frames.get("recorded", 0) >= 1 and not frames.get("bypasses") and not frames.get("internal_errors"), frames


@pytest.mark.parametrize("case", CASES)
def test_warm_serves_every_frame_without_tracing(passes, case):
    row = passes["warm"][case]
    frames = _frames(row)
    assert frames.get("hits", 0) >= 1 and not frames.get("misses") and not frames.get("internal_errors"), frames
    assert row["graphs"] == 0, f"Dynamo compiled {row['graphs']} graphs on a warm start"
    assert not row["stats"].get("misses"), row["stats"]


@pytest.mark.parametrize("case", CASES)
def test_results_bitwise_equal(passes, case):
    ref = passes["inductor"][case]["result"]
    assert _equal(passes["cold"][case]["result"], ref)
    assert _equal(passes["warm"][case]["result"], ref)


@pytest.mark.parametrize("case", CASES)
def test_variant_never_stale(passes, case):
    assert _equal(passes["warm-variant"][case]["result"], passes["inductor-variant"][case]["result"])
    if case in frame_cases.MUST_RETRACE:
        row = passes["warm-variant"][case]
        assert _frames(row).get("misses", 0) >= 1 or row["graphs"] >= 1, _frames(row)


def test_automatic_dynamic_state_carried_by_the_frame(passes):
    """After a frame hit, a new value traces as it would after a trace: symbolic at once (1 graph traced), the same
    graph count as a fresh process with backend="inductor" (2)."""
    case = "automatic_dynamic_after_hit"
    row, ref = passes["warm-variant"][case], passes["inductor-variant"][case]
    assert ref["graphs"] == 2, ref
    assert _frames(row).get("hits") == 1 and row["graphs"] == 1, (_frames(row), row["graphs"])


def test_candidates_known_to_fail_are_not_built_again(passes):
    """dtype_recompile's three calls hit three candidates of one frame, in the recorded order. The second call finds
    the first candidate's guard manager (built and served at the first call) failing and skips it; the third skips
    the first two: three skips, three guard builds instead of six. The cold process, which records the three, skips
    the same with the managers its recording check built."""
    frames = _frames(passes["warm"]["dtype_recompile"])
    assert frames.get("hits") == 3 and frames.get("known_failing") == 3, frames
    cold = _frames(passes["cold"]["dtype_recompile"])
    assert cold.get("recorded") == 3 and cold.get("known_failing") == 3, cold


def test_variant_changes_the_reference(passes):
    """The variant must change what the MUST_RETRACE cases compute, or the test above proves nothing (the config
    case changes how Dynamo traces, not the result: its check is the retrace)."""
    for case in frame_cases.MUST_RETRACE - {"config_changed"}:
        assert not _equal(passes["inductor"][case]["result"], passes["inductor-variant"][case]["result"]), case


def test_cli_lists_and_shows_frame_entries(passes):
    entries = json.loads(cli(passes["cache"], "ls", "--json"))
    kinds = {e["kind"] for e in entries}
    assert {"frame", "graph"} <= kinds, kinds
    frame = next(e for e in entries if e["kind"] == "frame")
    shown = cli(passes["cache"], "show", frame["key"])
    assert "payload_kind   'aotcache.frame'" in shown and "frame_format" in shown, shown


def test_a_frame_entry_counts_its_own_compile_time_not_its_graphs(passes):
    """`ls` and the saved-time counters: a frame entry's compile_seconds is Dynamo's trace alone (each graph entry
    carries its own compile); it used to include the graphs' compiles, counting them twice."""
    entries = json.loads(cli(passes["cache"], "ls", "--json"))
    frames = sum(e["compile_seconds"] for e in entries if e["kind"] == "frame")
    graphs = sum(e["compile_seconds"] for e in entries if e["kind"] == "graph")
    assert 0 < frames < 0.5 * graphs, (frames, graphs)


def test_serving_a_symbolic_graph_marks_its_guard_index_used(passes):
    """The warm process serves dynamic graphs through frames without reading their guard indexes; it must still mark
    them used, or eviction takes the index (oldest) and keeps the graph, which then never hits with frames off."""
    for case, row in passes["aged"].items():
        assert _frames(row).get("hits", 0) >= 1 and not _frames(row).get("misses"), (case, _frames(row))
    entries = json.loads(cli(passes["aged_cache"], "ls", "--json"))
    indexes = [e for e in entries if e["kind"] == "guard-index"]
    assert indexes, [e["kind"] for e in entries]
    stale = [e["key"][:16] for e in indexes if e["mtime_unix"] < passes["aged_at"] - 5]
    assert not stale, f"guard indexes not marked used by the warm process: {stale}"


def test_loaded_guards_are_a_fresh_traces(passes):
    """Every guard set the warm pass loaded from a frame entry equals, source by source and kind by kind (a content
    guard under the identity guard it replaced), a set Dynamo built tracing the same code afresh in another process
    (the fresh pass: frames off, the graphs still hit)."""
    logs = passes["guard_logs"]
    loaded, unmatched = loaded_guards_unmatched([logs["warm"]], [logs["fresh"]])
    assert loaded >= len(CASES), f"only {loaded} guard sets loaded"
    assert not unmatched, f"loaded guards that match no fresh trace: {unmatched}"


@pytest.mark.parametrize("phase", FAULT_PHASES)
def test_a_fault_in_the_frame_cache_is_contained(passes, phase):
    for case, row in passes["faults"][phase].items():
        assert "exception" not in row, row.get("traceback")
        assert _equal(row["result"], passes["inductor"][case]["result"]), case
        frames = _frames(row)
        assert frames.get(f"internal_error.{phase}", 0) >= 1 and not frames.get("hits"), (case, frames)
        served = row["stats"].get("misses" if phase == "record" else "hits", 0)
        assert row["graphs"] >= 1 and served >= 1, (case, row["stats"])  # traced; graphs hit (compiled on record)


def test_a_frame_whose_graph_was_evicted_traces_and_compiles(passes):
    """A frame entry outlives its graph entry (evicted, pruned): the frame is not served (miss.graph_evicted), Dynamo
    traces, the graph compiles again, and the counters add up: every traced graph is one miss, none a hit."""
    for case, row in passes["evicted"].items():
        assert "exception" not in row, row.get("traceback")
        assert _equal(row["result"], passes["inductor"][case]["result"]), case
        frames, stats = _frames(row), row["stats"]
        assert frames.get("miss.graph_evicted", 0) >= 1 and not frames.get("hits"), (case, frames)
        assert row["graphs"] >= 1 and stats.get("misses", 0) == row["graphs"] and not stats.get("hits"), (case, stats)
