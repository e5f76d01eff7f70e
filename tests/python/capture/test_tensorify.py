"""Symbolic floats (aotcache/tensorify.py): the float context keyed with a graph, float records (restart or values),
and the three ways a float graph is cached, in-process against a real ShapeEnv and real torch.compile (frames off,
so every graph goes through the graph cache); then Hugging Face models under dynamic=True with a scheduled compiled
AdamW step in fresh processes. More cross-process coverage: adversarial cases dyn_*float*, opt_adam*."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch._dynamo.source import LocalSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

import aotcache
from aotcache import tensorify
from aotcache.capture import symbolic
from aotcache.errors import Bypass
from conftest import SUPPORT, frames_on

pytestmark = pytest.mark.frames_off_too  # runs again with the frame cache off (make test)


# ---- canonical text and guards over a real ShapeEnv ------------------------------------------------------------------
def _float_input(env: ShapeEnv, name: str, value: float) -> torch.SymFloat:
    source = LocalSource(name)
    sym = env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
    return env.create_symfloatnode(sym, hint=value, source=source)


def _table(env: ShapeEnv, *floats: torch.SymFloat) -> symbolic.SymbolTable:
    table = symbolic.SymbolTable()
    for i, f in enumerate(floats):
        table.add_float(f, f"input {i}")
    return table


def test_float_constants_are_rendered_exactly():
    env = ShapeEnv()
    c = _float_input(env, "c", 2.5)
    table = _table(env, c)
    near = 0.1 + 2**-56  # one unit in the last place above 0.1
    assert str(sympy.Float(0.1)) == str(sympy.Float(near))  # why sympy's printing cannot be the key
    a, b = table.render_scalar(c * 0.1), table.render_scalar(c * near)
    assert a != b
    assert a == f"f0*float({(0.1).hex()})"
    assert table.render_scalar(c) == "f0"


def test_a_second_float_input_is_f1_and_an_unknown_symbol_bypasses():
    env = ShapeEnv()
    c, d = _float_input(env, "c", 2.5), _float_input(env, "d", 0.5)
    table = _table(env, c, d)
    assert table.render_scalar(d - c) == "-f0 + f1"
    other = _float_input(env, "e", 1.0)
    with pytest.raises(Bypass, match="of no input"):
        table.render_scalar(other * 2)


def test_compile_guards_on_floats_bypass_or_name_the_floats_or_are_skipped_when_keyed():
    env = ShapeEnv()
    c, d = _float_input(env, "c", 3.0), _float_input(env, "d", 0.5)
    table = _table(env, c, d)
    assert bool(c > 0)  # records a guard, as `if c > 0:` in traced code does
    keyed = frozenset({table.render_scalar(env.simplify(env.guards[-1].expr))})
    assert bool(d * 2 == 1.0)  # the kind of guard a compile adds when it bakes a value in
    with pytest.raises(Bypass, match="on a symbolic float input"):
        symbolic.compile_guards(table)
    guarded: set[int] = set()
    assert symbolic.compile_guards(table, guarded, keyed) == []
    assert guarded == {1}  # c's guard is keyed (Dynamo's own); d's is the compile's
    guarded_all: set[int] = set()
    symbolic.compile_guards(table, guarded_all)
    assert guarded_all == {0, 1}


# ---- float records: format and validation ----------------------------------------------------------------------------
class _Floats:
    graph_names = ["zf1", "zf2", "zf3"]
    other_names: list[str] = []


def test_record_golden_bytes():
    restart = tensorify.encode_record(restart={"specialize": ["f0"], "others": False})
    assert restart == b'{"restart": {"others": false, "specialize": ["f0"]}, "version": 1}'
    assert tensorify.encode_record(values=[2, 0]) == b'{"values": ["f0", "f2"], "version": 1}'
    assert tensorify.decode_record(restart, _Floats()) == {"restart": {"specialize": ["f0"], "others": False}}
    assert tensorify.decode_record(tensorify.encode_record(values=[2, 0]), _Floats()) == {"values": [0, 2]}


@pytest.mark.parametrize(
    "record",
    [
        {"version": 2, "values": ["f0"]},
        {"version": 1},
        {"version": 1, "values": ["f0"], "restart": {"specialize": [], "others": False}},
        {"version": 1, "values": []},
        {"version": 1, "values": ["f3"]},  # the graph has three floats
        {"version": 1, "values": ["f01"]},
        {"version": 1, "values": ["x0"]},
        {"version": 1, "restart": {"specialize": [], "others": False}},  # marks nothing
        {"version": 1, "restart": {"specialize": ["f0"], "others": True}},  # no other float in this ShapeEnv
        {"version": 1, "restart": {"specialize": "f0", "others": False}},
    ],
)
def test_malformed_records_are_refused(record):
    with pytest.raises(ValueError):
        tensorify.decode_record(json.dumps(record).encode(), _Floats())


# ---- end to end in this process ------------------------------------------------------------------------------------
@pytest.fixture
def graph_cache(tmp_path):
    aotcache.configure(cache_dir=str(tmp_path), frames=False)
    torch._dynamo.reset()
    yield tmp_path
    from aotcache import settings

    settings.reset()
    torch._dynamo.reset()


def _run(fn, calls) -> tuple[list, dict]:
    """Compiles `fn` in a fresh Dynamo, runs it on each argument tuple; (results, delta of aotcache's counters)."""
    torch._dynamo.reset()
    before = aotcache.stats()
    g = torch.compile(fn, backend="aotcache")
    out = [g(*args) for args in calls]
    after = aotcache.stats()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in ("hits", "misses", "bypasses", "errors")}
    for k in ("recorded", "replayed", "unrecorded"):
        delta[f"tensorify.{k}"] = after.get("tensorify", {}).get(k, 0) - before.get("tensorify", {}).get(k, 0)
    return out, delta


def _inductor(fn, calls) -> list:
    """The reference: backend="inductor" with torch's own caches off. With them on, torch 2.13 serves
    `_returns_float`'s graph compiled for c=3.0 to c=2.5 (returning 6.0): its key does not hold the value the
    compile guarded on, and its hit does not check that guard."""
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    ):
        g = torch.compile(fn, backend="inductor")
        return [g(*args) for args in calls]


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def _scaled(x, c):
    return x * c + 1


def _returns_float(x, c):
    return x * c + 1, c * 2


def _resize(x, s):
    return F.interpolate(x, scale_factor=s, mode="nearest") * 2


X = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
SIGNAL = torch.randn(1, 2, 8, generator=torch.Generator().manual_seed(1))


def test_a_float_kept_symbolic_is_one_entry_for_every_value(graph_cache):
    calls = [(X, c) for c in (2.0, 3.0, -1.25, 0.1)]
    cold, c_delta = _run(_scaled, calls)
    warm, w_delta = _run(_scaled, calls)
    reference = _inductor(_scaled, calls)
    assert all(_same(a, b) for a, b in zip(cold, reference))
    assert all(_same(a, b) for a, b in zip(warm, cold))
    assert c_delta["misses"] == 2 and c_delta["bypasses"] == 0  # c static (2.0), then c symbolic
    assert w_delta["hits"] == 2 and w_delta["misses"] == 0


def test_a_float_the_compile_guards_is_keyed_by_its_value(graph_cache):
    calls = [(X, c) for c in (2.0, 3.0, 2.5)]
    cold, c_delta = _run(_returns_float, calls)
    warm, w_delta = _run(_returns_float, calls)
    assert all(_same(a, b) for a, b in zip(warm, cold))
    assert all(_same(a, b) for a, b in zip(cold, _inductor(_returns_float, calls)))
    assert c_delta["misses"] == 3 and c_delta["bypasses"] == 0
    assert w_delta["hits"] == 3 and w_delta["misses"] == 0
    new_value, n_delta = _run(_returns_float, [(X, 2.0), (X, 3.0), (X, -7.5)])
    assert n_delta["misses"] == 1 and n_delta["hits"] == 2  # a value no entry was compiled for
    assert _same(new_value[2], _inductor(_returns_float, [(X, -7.5)])[0])


def test_a_restart_is_recorded_cold_and_replayed_warm(graph_cache):
    calls = [(SIGNAL, s) for s in (2.0, 3.0, 1.5)]
    cold, c_delta = _run(_resize, calls)
    warm, w_delta = _run(_resize, calls)
    assert all(_same(a, b) for a, b in zip(cold, _inductor(_resize, calls)))
    assert all(_same(a, b) for a, b in zip(warm, cold))
    assert c_delta["tensorify.recorded"] == 1 and w_delta["tensorify.replayed"] == 1
    assert w_delta["misses"] == 0 and w_delta["hits"] == c_delta["misses"]


def test_an_unusable_record_is_counted_and_the_graph_compiled(graph_cache, monkeypatch, caplog):
    calls = [(SIGNAL, s) for s in (2.0, 3.0)]
    real = tensorify.encode_record
    monkeypatch.setattr(tensorify, "encode_record", lambda **kw: real(values=[5]))  # names a float the graph lacks
    cold, _ = _run(_resize, calls)
    monkeypatch.setattr(tensorify, "encode_record", real)
    warm, w_delta = _run(_resize, calls)
    assert all(_same(a, b) for a, b in zip(warm, cold))
    assert w_delta["errors"] == 1 and w_delta["tensorify.replayed"] == 0
    assert aotcache.stats()["error_kinds"].get("float_record", 0) >= 1
    assert any("float record" in r.getMessage() for r in caplog.records)


def test_a_restart_marks_what_the_pass_marks():
    """The replay marks exactly the floats the recorded decision names (by canonical index), then raises the
    restart Dynamo expects."""
    env = ShapeEnv()
    c, d = _float_input(env, "c", 3.0), _float_input(env, "d", 0.5)
    floats = tensorify.FloatContext([], frozenset(), [str(c.node._expr), str(d.node._expr)], [], _table(env, c, d))
    state = tensorify._state()
    state.clear()
    try:
        error = floats.replay({"specialize": ["f1"], "others": False})
        assert tensorify.is_restart(error)
        assert tensorify.marked() == {str(d.node._expr)}
        assert floats.decision(frozenset()) == {"specialize": ["f1"], "others": False}
        state.specialize("zf999")  # a float this graph does not name: not recordable
        assert floats.decision(frozenset()) is None
    finally:
        state.clear()


@pytest.mark.timeout(1500)
@pytest.mark.skipif(not frames_on(), reason="runs its warm process with the frame cache on and off itself")
def test_hf_models_under_dynamic_true_with_a_scheduled_compiled_step(tmp_path):
    """GPT-2 and Llama (zoo_models.py; BERT too with HF_FLOAT_MODELS=gpt2,llama,bert) trained under dynamic=True
    with a compiled AdamW step and a cosine schedule: every float is symbolic (norm eps, attention scaling, the
    learning rate). Cold compiles and records the tensorify restarts; warm with frames on compiles nothing; warm with
    frames off replays each restart and hits every graph; all bitwise equal to uncached inductor."""
    here = SUPPORT
    env = {**os.environ, "AOTCACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}

    def run(backend: str, label: str, **extra: str) -> dict:
        out = tmp_path / f"{label}.pt"
        # One Inductor directory for every process: the reference builds each C++ kernel once and the cold process
        # loads it by its key (source and command line) instead of running g++ again; the compiled code is the same.
        full = {**env, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
        done = subprocess.run(
            [sys.executable, str(here / "hf_float_worker.py"), backend, str(out)],
            env={**full, **extra},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"{label}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        stats = [json.loads(ln[6:]) for ln in done.stdout.splitlines() if ln.startswith("STATS ")]
        return {"out": torch.load(out), "stats": stats[0] if stats else None}

    ref = run("inductor", "ref")
    cold = run("aotcache", "cold")
    warm = run("aotcache", "warm")
    noframes = run("aotcache", "noframes", AOTCACHE_FRAMES="0")
    for r in (cold, warm, noframes):
        assert r["out"].keys() == ref["out"].keys()
        assert [k for k in ref["out"] if not torch.equal(r["out"][k], ref["out"][k])] == []
    c, w, n = cold["stats"], warm["stats"], noframes["stats"]
    assert c["bypasses"] == 0 and c["misses"] >= 6, c
    assert c["tensorify"].get("recorded", 0) >= 1, c["tensorify"]  # eps under dynamic=True restarts Dynamo
    assert w["misses"] == 0 and w["bypasses"] == 0 and w["hits"] == c["misses"], w
    assert n["misses"] == 0 and n["bypasses"] == 0 and n["hits"] == c["misses"], n
    assert n["tensorify"].get("replayed", 0) == c["tensorify"]["recorded"], n["tensorify"]
