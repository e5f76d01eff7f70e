"""Cacheability with real models (issue 4): higher-order ops, custom ops and Functions, nn modules.

Three fresh processes run every case of cacheability_cases.py:
  A  (variant a, empty cache)   every cacheable case misses and is stored; every other case bypasses with its reason
  B  (variant a, A's cache)     every cacheable case hits, with results bitwise equal to A's
  C  (variant b, a copy of A's) changing a pinned implementation (custom op body, Function backward, checkpoint
                                policy, registered op version) misses
Results are compared with the uncompiled computation as well.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cacheability_cases import BY_NAME, CASES

from aotcache import _core
from aotcache.capture import graph as capture
from conftest import SUPPORT

HERE = SUPPORT
# The first test pays for the three passes of the module fixture (every case compiled in three processes).
pytestmark = pytest.mark.timeout(2400)


def _run_pass(variant: str, cache: Path, out: Path, inductor: Path, names: list[str], torch_verdict: bool) -> dict:
    env = dict(os.environ)
    env.update(
        {
            "AOTCACHE_DIR": str(cache),
            "TORCHINDUCTOR_CACHE_DIR": str(inductor),
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        }
    )
    args = [sys.executable, str(HERE / "cacheability_worker.py"), variant, str(out), *names]
    if torch_verdict:
        args.append("--torch-verdict")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["case"]: r for r in rows}


@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("cacheability")
    inductor = root / "inductor"
    out = root / "out"
    out.mkdir()
    names = [c.name for c in CASES]
    a = _run_pass("a", root / "cache", out, inductor, names, torch_verdict=True)
    shutil.copytree(root / "cache", root / "cache_c")
    b = _run_pass("a", root / "cache", out / "b", inductor, names, torch_verdict=False) if _mkdir(out / "b") else {}
    changed = [c.name for c in CASES if c.changes_in_b]
    c = _run_pass("b", root / "cache_c", out, inductor, changed, torch_verdict=False)
    return {"a": a, "b": b, "c": c, "out": out}


def _mkdir(p: Path) -> bool:
    p.mkdir()
    return True


def _no_error(row: dict) -> None:
    assert "error" not in row, row["error"]


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_first_process_stores_or_bypasses_with_its_reason(passes, name):
    case, row = BY_NAME[name], passes["a"][name]
    _no_error(row)
    if case.expect == "hit":
        assert row["misses"] >= 1 and row["bypasses"] == 0, row
    else:
        reason = case.expect.split(":", 1)[1]
        assert row["bypass_reasons"].get(reason, 0) >= 1 and row["misses"] == 0, row


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_second_process_hits_with_equal_results(passes, name):
    case, row = BY_NAME[name], passes["b"][name]
    _no_error(row)
    first = torch.load(passes["out"] / f"{name}.a.pt")
    second = torch.load(passes["out"] / "b" / f"{name}.a.pt")
    eager = torch.load(passes["out"] / f"{name}.a.eager.pt")
    if case.expect == "hit":
        assert row["hits"] >= 1 and row["misses"] == 0 and row["bypasses"] == 0, row
        assert len(first) == len(second)
        for x, y in zip(first, second):  # the same compiled code: bitwise
            assert torch.equal(x, y), (x - y).abs().max()
    else:
        assert row["bypasses"] >= 1 and row["hits"] == 0, row
    tolerance = {"atol": 2e-2, "rtol": 2e-2} if name == "autocast_region" else {"atol": 1e-4, "rtol": 1e-4}
    for x, e in zip(second, eager):
        torch.testing.assert_close(x, e, **tolerance)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.changes_in_b])
def test_changing_a_pinned_implementation_misses(passes, name):
    row = passes["c"][name]
    _no_error(row)
    assert row["misses"] >= 1 and row["hits"] == 0, row
    changed = torch.load(passes["out"] / f"{name}.b.pt")
    eager = torch.load(passes["out"] / f"{name}.b.eager.pt")
    for x, e in zip(changed, eager):  # the new implementation's results, not the cached ones
        torch.testing.assert_close(x, e, atol=1e-4, rtol=1e-4)


def test_torch_verdicts_are_recorded_for_the_report(passes):
    verdicts = {name: row.get("torch_verdict", "") for name, row in passes["a"].items()}
    assert all(verdicts.values()), verdicts
    # Torch's own check refuses what aotcache keys by content (cond, while_loop, autograd.Function)...
    assert verdicts["cond"].startswith("bypass"), verdicts["cond"]
    # ... and accepts a custom op whatever its implementation, which aotcache pins.
    assert verdicts["custom_op_source_digest"] == "cacheable"


# ---- in-process checks of the capture layer, no compile -------------------------------------------------------------
class _UnknownHop(torch._ops.HigherOrderOperator):
    def __init__(self) -> None:
        super().__init__("aotcache_test_unknown_hop")

    def __call__(self, body, x):
        return super().__call__(body, x)


def test_unknown_higher_order_op_bypasses_with_its_name():
    body = torch.fx.symbolic_trace(torch.nn.ReLU())
    root = torch.nn.Module()
    root.body = body
    g = torch.fx.Graph()
    x = g.placeholder("x")
    call = g.call_function(_UnknownHop(), (g.get_attr("body"), x))
    g.output((call,))
    verdict = _core.check_graph(capture.capture_graph(torch.fx.GraphModule(root, g)))
    assert verdict is not None and verdict[0] == "higher_order_op_unknown"
    assert "aotcache_test_unknown_hop" in verdict[1]


def test_subgraph_bodies_reach_the_key_and_calls_inside_them_are_checked():
    def helper(t):  # a user function called inside a higher-order op's body
        return t * 2

    inner = torch.fx.Graph()
    y = inner.placeholder("y")
    inner.output((inner.call_function(helper, (y,)),))
    root = torch.nn.Module()
    root.body = torch.fx.GraphModule(torch.nn.Module(), inner)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.ops.higher_order.invoke_subgraph, (g.get_attr("body"), "body", x)),))
    verdict = _core.check_graph(capture.capture_graph(torch.fx.GraphModule(root, g)))
    assert verdict is not None and verdict[0] == "python_function"
    assert "body/" in verdict[1] and "helper" in verdict[1]


def test_register_op_version_rejects_malformed_names():
    import aotcache

    with pytest.raises(ValueError):
        aotcache.register_op_version("no_namespace", "1")
    with pytest.raises(ValueError):
        aotcache.register_op_version("ns::op.default", "1")  # every overload is pinned together
    with pytest.raises(ValueError):
        aotcache.register_op_version("ns::op", "")


def test_code_digest_follows_closures_and_globals_and_refuses_opaque_state():
    from aotcache.capture.code_digest import Unhashable, function_digest

    def make(ops):
        def policy(ctx, op, *args, **kwargs):
            return op in ops

        return policy

    mm, add = torch.ops.aten.mm.default, torch.ops.aten.add.Tensor
    assert function_digest(make([mm])) == function_digest(make([mm]))
    assert function_digest(make([mm])) != function_digest(make([mm, add]))
    with pytest.raises(Unhashable):
        function_digest(make(object()))
