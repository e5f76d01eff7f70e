"""bench/run.py's arithmetic on synthetic worker results: ratios, miss overhead, goals, the table (no processes run;
`make bench-quick` is the end-to-end smoke test, too slow for CI)."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import run  # noqa: E402  (bench/run.py)


def _run(mode: str, rep: int, first: float, **phases: float) -> dict:
    aot = "aotcache" in mode
    stats = {"hits": 0, "misses": 0, "bypasses": 0, "errors": 0, "bypass_reasons": {}}
    if aot:
        stats["hits" if mode.startswith("warm") else "misses"] = 1
    base = {"dynamo_s": 0.5, "backend_s": 1.0, "run_s": 0.2}
    if aot:
        base.update({k: 0.0 for k in ("key_s", "lookup_s", "load_s", "miss_compile_s", "miss_store_s", "miss_total_s")})
    base.update(phases)
    probes = {"vec_isa_probe": 1.0}
    if mode == "cold_aotcache":
        probes.update({"aotcache.environment": 1.0, "aotcache.serialize": 0.1})
    return {
        "mode": mode,
        "rep": rep,
        "backend": "aotcache" if aot else "inductor",
        "first_result_s": first,
        "process_wall_s": first + 5,
        "second_step_s": 0.01,
        "max_rss_mb": 400.0,
        "phases": base,
        "probes": {"seconds": probes, "calls": {}},
        "compile_file": {"count": 0, "seconds": 0.0},
        "graphs": 1,
        "aotcache_stats": stats if aot else None,
        "torch_counters": {"autograd_cache_hit": 1, "fxgraph_cache_hit": 2} if mode == "warm_torch" else {},
    }


def _runs() -> list[dict]:
    return [
        _run("cold_torch", 0, 40.0),
        # miss: compile 20.1 s of which 0.1 s serialization; key 1.3 s of which 1.0 s ISA probe; store 0.1 s
        _run("cold_aotcache", 0, 42.0, key_s=1.3, miss_compile_s=20.1, miss_store_s=0.1, miss_total_s=21.5),
        _run("warm_torch", 0, 5.0),
        _run("warm_aotcache", 0, 3.0, frame_load_s=0.8, frame_hits=1),
        _run("warm_aotcache_noframes", 0, 4.0),
        _run("warm_torch", 1, 6.0),
        _run("warm_aotcache", 1, 5.0, frame_load_s=1.2, frame_hits=1),
        _run("warm_aotcache_noframes", 1, 6.0),
    ]


def test_ratios_use_medians_and_side_by_side_pairs():
    s = run.summarize_model("gpt_block", _runs())
    assert s["ratios"]["cold_over_warm_aotcache"] == pytest.approx(40.0 / 4.0)
    assert s["ratios"]["warm_aotcache_over_warm_torch"] == pytest.approx(4.0 / 5.5)
    assert sorted(s["ratios"]["warm_aotcache_over_warm_torch_pairs"]) == pytest.approx([3.0 / 5.0, 5.0 / 6.0])
    assert s["warm_aotcache_all_hit"] and s["warm_torch_all_hit"]


def test_miss_overhead_counts_serialization_but_not_the_isa_probe():
    mo = run.summarize_model("gpt_block", _runs())["miss_overhead"]
    # added = total - compile + serialize - probe = 21.5 - 20.1 + 0.1 - 1.0 = 0.5; compile without serialize = 20.0
    assert mo["added_s"] == pytest.approx(0.5)
    assert mo["compile_s"] == pytest.approx(20.0)
    assert mo["share"] == pytest.approx(0.025)
    assert mo["share_incl_probe"] == pytest.approx(0.075)


def test_miss_overhead_with_frames_counts_the_frame_cache_and_the_probe_once():
    """With the frame cache on, the frame's key runs first and pays the vector-ISA probe; the graph's key then finds
    it memoized. The frame cache's key, lookup and record are aotcache's overhead; the probe is not, wherever it ran."""
    r = _run("cold_aotcache", 0, 42.0, key_s=0.3, miss_compile_s=20.1, miss_store_s=0.1, miss_total_s=20.5)
    r["probes"]["seconds"].update(
        {"aotcache.frame_key": 1.05, "aotcache.frame_lookup": 0.01, "aotcache.frame_record": 0.04}
    )
    mo = run.miss_overhead([r])
    # added = 20.5 - 20.1 + 0.1 (serialize) + 1.1 (frames) - 1.0 (probe) = 0.6
    assert mo["added_s"] == pytest.approx(0.6)
    assert mo["share"] == pytest.approx(0.6 / 20.0)
    assert mo["runs"][0]["key_s_excl_probe"] == pytest.approx(0.0)


def test_goals_and_table():
    summaries = [run.summarize_model("gpt_block", _runs())]
    g = run.goals(summaries)
    assert g["warm_aotcache_over_warm_torch"]["met"]  # 0.73 <= 0.8
    assert g["cold_over_warm_aotcache_gpt_block"]["met"]  # 10.0 >= 10
    assert g["miss_overhead"]["met"]  # 2.5% < 3%
    report = {
        "machine": {"date": "d", "nproc": 2, "cpu_model": "cpu", "memory_gib": 1, "platform": "p", "python": "3"}
        | {"torch": "t", "aotcache": "a"},
        "loadavg": [1.0, 2.0],
        "command": "bench/run.py",
        "wall_s": 60.0,
        "models": summaries,
        "goals": g,
        "key_speed": None,
    }
    text = run.markdown(report)
    assert "| gpt_block | 1/2 | 40.00 (40.00-40.00) |" in text
    assert "10.0x | 0.73x | 0.91x | all hit / all hit |" in text  # frames off: median 5.0 / 5.5
    # the frames' load (median of 0.8 and 1.2) in its own column, between the graphs' load and the backend
    assert "| gpt_block | warm_aotcache | 0.50 | 0.00 | 1.00 | 0.000 | 0.00 | 1.00 | 1.00 |" in text
    assert "| gpt_block | warm_aotcache_noframes | 0.50 | 0.00 | 1.00 | 0.000 | 0.00 | 0.00 | 1.00 |" in text
    assert "**NOT met**" not in text


def test_a_bypassed_warm_run_is_not_a_hit_and_fails_the_warm_goal():
    runs = _runs()
    for r in runs:
        if r["mode"] == "warm_aotcache":
            r["aotcache_stats"].update(hits=0, bypasses=1, bypass_reasons={"higher_order_op": 1})
            r["first_result_s"] = 30.0
    s = run.summarize_model("checkpoint", runs)
    assert not s["warm_aotcache_all_hit"]
    assert not run.goals([s])["warm_aotcache_over_warm_torch"]["met"]


# ---- bench/peers.py: every peer against eager ------------------------------------------------------------------------
def _peer_row(mode: str, to_first: float, **extra):
    backend = "aotcache" if mode.startswith(("aotcache", "frames")) else "other"
    row = {
        "mode": mode,
        "rep": 0,
        "backend": backend,
        "to_first_result_s": to_first,
        "first_result_s": to_first / 2,
        "process": {"import_s": to_first / 4},
        "phases": {"dynamo_s": 0.0, "backend_s": 0.0, "run_s": to_first / 2, "frame_hits": 3},
        "gc": {"seconds": 0.01, "full": 1},
        "hits": 3,
        "misses": 0,
        "bypasses": 0,
        "torch_counters": {},
        "equal": "bitwise",
    }
    row.update(extra)
    return row


def test_peers_table_compares_with_eager_and_the_best_working_torch_mechanism():
    import peers  # bench/peers.py

    runs = [
        _peer_row("eager", 0.5, equal="close"),
        _peer_row("torch_cold", 20.0),
        _peer_row("torch_warm", 4.0),
        _peer_row("mega_cold", 20.0),
        _peer_row("mega_warm", 3.0, equal="DIFFERENT"),  # a wrong result never counts as the best peer
        {"mode": "precompile_cold", "rep": 0, "error": "PackageError: Cannot resolve a fully qualified name"},
        {"mode": "precompile_warm", "rep": 0, "error": "not run: precompile_cold failed"},
        _peer_row("aot_cold", 20.0),
        _peer_row("aot_warm", 2.0),
        _peer_row("aotcache_cold", 20.0),
        _peer_row("aotcache_warm", 1.5),
        _peer_row("frames_warm", 0.6),
        _peer_row("frames_fresh", 0.7),
    ]
    s = peers.summarize_item("gpt2:train", runs)
    assert s["aotcache_minus_eager_s"] == pytest.approx(0.1)
    assert s["aotcache_over_eager"] == pytest.approx(1.2)
    assert s["best_torch_mode"] == "aot_warm" and s["aotcache_over_best_torch"] == pytest.approx(0.3)
    assert s["modes"]["precompile_warm"]["errors"] == ["not run: precompile_cold failed"]
    report = {
        "machine": {
            "date": "2026-12-06",
            "nproc": 2,
            "cpu_model": "x",
            "platform": "p",
            "python": "3.11",
            "torch": "2.13.0",
            "aotcache": "0.1.0",
        },  # fmt: skip
        "transformers": "5.23.0",
        "command": "bench/peers.py",
        "wall_s": 60.0,
        "loadavg": [1.0, 1.0],
        "reps": 1,
        "items": [s],
    }
    text = peers.markdown(report)
    row = next(ln for ln in text.splitlines() if ln.startswith("| gpt2:train | 0.50"))
    assert "fails: not run: precompile_cold failed" in row and "3.00 DIFFERENT" in row
    assert "+0.10 s" in row and "1.20x" in row and "0.30x (aot_compile)" in row
    assert "fails: PackageError" in text  # the cold table says why
