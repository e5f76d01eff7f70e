"""Dynamic shapes (issue 8): symbolic graphs cached under guards evaluated in C++, across processes.

Each case runs processes against one cache and compares every result with an uncached run (AOTCACHE_DISABLE=1,
which compiles exactly as backend="inductor") at the same sizes: bitwise, since the compiled code is the same.
"""

from __future__ import annotations

import pytest

from aotcache import _core
from conftest import assert_bitwise_equal, frames_on

pytestmark = pytest.mark.frames_off_too  # runs again with the frame cache off (make test)

UNCACHED = {"AOTCACHE_DISABLE": "1"}


def _uncached(run_fresh, *flags):
    return run_fresh("shapes", *flags, env=UNCACHED).tensors


def test_mark_dynamic_one_compile_serves_other_sizes_in_a_new_process(run_fresh):
    a = run_fresh("shapes", "--sizes", "16,24")
    assert a.stats["misses"] == 1 and a.stats["hits"] == 0 and a.stats["bypasses"] == 0, a.stats
    b = run_fresh("shapes", "--sizes", "40,24")
    assert b.stats["hits"] == 1 and b.stats["misses"] == 0, b.stats
    assert_bitwise_equal(b.tensors, _uncached(run_fresh, "--sizes", "40,24"))
    if frames_on():  # the frame cache served the frame (Dynamo's guards rebuilt: 2 <= s0), its graph by key
        assert b.stats["frames"]["hits"] == 1, b.stats
    else:  # the graph pipeline chose the symbolic candidate by its guards, evaluated in C++
        assert b.log_lines("hit") and "guards=" in b.log_lines("hit")[0]


def test_training_step_with_symbolic_batch_hits_with_equal_gradients(run_fresh):
    a = run_fresh("shapes", "--sizes", "16", "--input-grad")
    assert a.stats["misses"] == 1, a.stats
    b = run_fresh("shapes", "--sizes", "32", "--input-grad")
    assert b.stats["hits"] == 1 and b.stats["misses"] == 0, b.stats
    assert_bitwise_equal(b.tensors, _uncached(run_fresh, "--sizes", "32", "--input-grad"))


def test_dynamic_true_hits_across_processes(run_fresh):
    run_fresh("shapes", "--sizes", "16", "--dynamic-mode", "true")
    b = run_fresh("shapes", "--sizes", "20", "--dynamic-mode", "true")
    assert b.stats["hits"] == 1 and b.stats["misses"] == 0, b.stats
    assert_bitwise_equal(b.tensors, _uncached(run_fresh, "--sizes", "20", "--dynamic-mode", "true"))


def test_automatic_dynamic_after_a_recompile_is_cached(run_fresh):
    a = run_fresh("shapes", "--sizes", "16,24", "--dynamic-mode", "automatic")
    assert a.stats["misses"] == 2, a.stats  # static 16, then the recompile turns dynamic
    b = run_fresh("shapes", "--sizes", "16,32", "--dynamic-mode", "automatic")
    assert b.stats["hits"] == 2 and b.stats["misses"] == 0, b.stats
    assert_bitwise_equal(b.tensors, _uncached(run_fresh, "--sizes", "16,32", "--dynamic-mode", "automatic"))


def test_sizes_one_is_outside_the_guards_and_misses(run_fresh):
    run_fresh("shapes", "--sizes", "16")
    b = run_fresh("shapes", "--sizes", "1")  # 0/1 specialization: the symbolic entry's guard 2 <= s0 fails
    assert b.stats["hits"] == 0 and b.stats["misses"] == 1, b.stats
    assert_bitwise_equal(b.tensors, _uncached(run_fresh, "--sizes", "1"))


def test_guard_miss_adds_a_candidate_and_each_size_finds_its_own(run_fresh):
    a = run_fresh("shapes", "--sizes", "16", "--head", "10")  # guard s0 >= 10
    assert a.stats["misses"] == 1, a.stats
    b = run_fresh("shapes", "--sizes", "5", "--head", "10")  # same graph and key; s0 >= 10 fails: a guard miss
    assert b.stats["misses"] == 1 and b.stats["miss_reasons"] == {"guards": 1}, b.stats
    c = run_fresh("shapes", "--sizes", "12", "--head", "10")
    assert c.stats["hits"] == 1 and c.stats["misses"] == 0, c.stats
    d = run_fresh("shapes", "--sizes", "7", "--head", "10")
    assert d.stats["hits"] == 1 and d.stats["misses"] == 0, d.stats
    assert_bitwise_equal(c.tensors, _uncached(run_fresh, "--sizes", "12", "--head", "10"))
    assert_bitwise_equal(d.tensors, _uncached(run_fresh, "--sizes", "7", "--head", "10"))


def test_divisibility_guards_separate_candidates(run_fresh):
    a = run_fresh("shapes", "--sizes", "16", "--fold")  # Eq(Mod(s0, (s0//4)), 0) among the guards
    assert a.stats["misses"] == 1, a.stats
    b = run_fresh("shapes", "--sizes", "18", "--fold")  # the same graph; 18 % 4 != 0: a guard miss
    assert b.stats["misses"] == 1 and b.stats["miss_reasons"] == {"guards": 1}, b.stats
    c = run_fresh("shapes", "--sizes", "32,19", "--fold")  # each size finds the candidate whose guards hold
    assert c.stats["hits"] == 2 and c.stats["misses"] == 0, c.stats
    assert_bitwise_equal(c.tensors, _uncached(run_fresh, "--sizes", "32,19", "--fold"))


def test_declared_range_is_served_only_by_a_candidate_compiled_for_all_of_it(run_fresh):
    # The graph pipeline's choice, so frames off: with them on, the first process's frame serves the second call, as
    # Dynamo's own guards do within one process (they check the marked dims, not the declared bounds; the frame's
    # guards hold 2 <= s0 <= 32, so the code is valid for 20). tests/python/frames/test_frames.py covers the frame side.
    off = {"AOTCACHE_FRAMES": "0"}
    run_fresh("shapes", "--sizes", "16", "--max", "32", env=off)
    # The first candidate holds at 20 but was compiled for s0 <= 32; mark_dynamic(max=64) demands code valid up to
    # 64 (Dynamo raises otherwise), so it must not be served: a miss, and a compile that works.
    b = run_fresh("shapes", "--sizes", "20", "--max", "64", env=off)
    assert b.stats["misses"] == 1 and b.stats["hits"] == 0 and b.stats["errors"] == 0, b.stats
    c = run_fresh("shapes", "--sizes", "40", "--max", "64", env=off)
    assert c.stats["hits"] == 1 and c.stats["misses"] == 0, c.stats
    assert_bitwise_equal(c.tensors, _uncached(run_fresh, "--sizes", "40", "--max", "64"))


def test_a_corrupt_guard_rejects_its_candidate_never_evaluates_it_otherwise():
    choice, reasons = _core.select_guarded([["2 <= s0", "Eq(Mod(s0, 8), __import__('os'))"], ["2 <= s0"]], [16])
    assert choice == 1
    assert len(reasons) == 1 and "candidate 0 rejected" in reasons[0]
    choice, reasons = _core.select_guarded([["s0 * 4611686018427387904 >= 1"]], [4])  # overflow: no match
    assert choice is None and "candidate 0 rejected" in reasons[0]
    with pytest.raises(_core.CacheError):
        _core.guard_tree("Eq(s0, ")


def test_guard_tree_matches_the_parsed_expression():
    assert _core.guard_tree("Eq(Mod(s0, 8), 0)") == ("eq", ("mod", ("sym", 0), ("int", 8)), ("int", 0))
    assert _core.guard_tree("2 <= s1") == ("le", ("int", 2), ("sym", 1))
