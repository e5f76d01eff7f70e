"""The variant bank (the proof): for each case, two fresh processes on one fresh cache; the second must hit or miss.

The case table and the runner are in variant_bank.py. Pairs run in the background, AOTCACHE_BANK_WORKERS (default
2) at a time, in the order the selected tests run; each test waits for its own pair and asserts aotcache's side:
A compiled and stored, nothing bypassed, B hit (and gave bitwise A's results when it computed the same thing) or
missed as the case says, and every compiled output matches eager.

To fit the time budget, cases whose process A is the very same run share one run of it, and each such pair's B
starts from its own copy of the cache directory A left (variant_bank.Bank, share_a). AOTCACHE_BANK_STRICT=1 runs
every pair's own A instead (about twice the processes).

AOTCACHE_BANK_TORCH=1 also runs each pair with backend="inductor" and torch's own caches, records torch's verdict
(never asserted) and writes the side-by-side table to AOTCACHE_BANK_REPORT (default build/variant_bank.md).
scripts/variant_bank_report.py does the same outside pytest.

    pytest -q tests/python/soundness/test_variant_bank.py                  # the bank, aotcache's side (a few minutes)
    pytest -q tests/python/soundness/test_variant_bank.py -k salt          # one case
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

import variant_bank as vb
from conftest import REPO

WORKERS = int(os.environ.get("AOTCACHE_BANK_WORKERS", "2"))
WITH_TORCH = os.environ.get("AOTCACHE_BANK_TORCH", "") == "1"
STRICT = os.environ.get("AOTCACHE_BANK_STRICT", "") == "1"

HITS = [c for c in vb.CASES if c.expected == "hit"]
MISSES = [c for c in vb.CASES if c.expected == "miss"]


@pytest.fixture(scope="module")
def bank(request, tmp_path_factory):
    """(case name, side) -> Future[PairResult], for the bank tests selected in this session, started at once."""
    selected: list[vb.Case] = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and isinstance(params.get("case"), vb.Case):
            selected.append(params["case"])
    sides = vb.SIDES if WITH_TORCH else ("aotcache",)
    runner = vb.Bank(tmp_path_factory.mktemp("bank"), share_a=not STRICT)
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="bank")
    futures: dict[tuple[str, str], Future] = {}
    for case in selected:
        for side in sides:
            if side == "aotcache" or case.torch_applicable:
                futures[(case.name, side)] = pool.submit(runner.run, case, side)
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)
    if WITH_TORCH:
        results: dict[str, dict[str, vb.PairResult]] = {}
        for (name, side), f in futures.items():
            if f.done() and not f.cancelled() and f.exception() is None:
                results.setdefault(name, {})[side] = f.result()
        out = Path(os.environ.get("AOTCACHE_BANK_REPORT", REPO / "build" / "variant_bank.md"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(vb.markdown_report(results))


def _check(bank, case: vb.Case) -> None:
    result: vb.PairResult = bank[(case.name, "aotcache")].result()
    if WITH_TORCH and case.torch_applicable:
        theirs: vb.PairResult = bank[(case.name, "torch")].result()
        print(f"{case.name}: expected {case.expected}, aotcache {result.verdict()}, torch {theirs.verdict()}")
    problems = result.problems()
    assert not problems, f"case {case.name} (B must {case.expected}):\n" + "\n".join(problems)


@pytest.mark.parametrize("case", HITS, ids=[c.name for c in HITS])
def test_must_hit(bank, case):
    _check(bank, case)


@pytest.mark.parametrize("case", MISSES, ids=[c.name for c in MISSES])
def test_must_miss(bank, case):
    _check(bank, case)


def test_bank_covers_the_issue():
    """At least 40 pairs, every variant the issue names, each script valid Python, A and B differing as intended."""
    assert len(vb.CASES) >= 40
    required_hits = {
        "renamed_local_variables",
        "renamed_module_attributes",
        "model_file_moved",
        "lines_added_above_model",
        "other_pythonhashseed",
        "other_working_directory",
        "other_parameter_values",
        "aliased_inputs_other_values",
    }
    required_misses = {
        "op_changed",
        "constant_tensor_value",
        "scalar_type",
        "scalar_value",
        "kwarg_gelu_approximate",
        "kwarg_softmax_dim",
        "input_dtype",
        "input_stride",
        "input_requires_grad",
        "grad_mode",
        "autocast_dtype",
        "deterministic_algorithms",
        "float32_matmul_precision",
        "inductor_config",
        "functorch_config",
        "backend_options",
        "input_shape",
        "aotcache_salt",
        "env_override_torch_version",
        "env_override_python_version",
        "env_override_cpu_isa",
        "aliased_inputs_overlapping",
    }
    assert required_hits <= {c.name for c in HITS}
    assert required_misses <= {c.name for c in MISSES}
    for case in vb.CASES:
        scripts = [vb.render(p.subs, backend="aotcache") for p in (case.a, case.b)]
        for s in scripts:
            compile(s, f"<{case.name}>", "exec")
        differs = (scripts[0] != scripts[1], case.a.env != case.b.env, case.a.cwd != case.b.cwd)
        assert any(differs) or case.a.location != case.b.location, f"{case.name}: A and B are the same run"
