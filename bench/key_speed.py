"""Key computation speed: aotcache's key path against torch 2.13's AOTAutograd cache key, same graphs, one process.

aotcache: everything `aotcache.backend.aotcache_backend` does before the store lookup, part by part:
settings.current(), capture.capture_graph, capture.capture_inputs, _core.check_graph, global_state.autograd_state,
global_state.config_state({}), global_state.environment, global_state.user_state, _core.compute_key.

torch: `torch._inductor.standalone_compile.autograd_cache_key(gm, inputs, dynamic_shapes="from_example_inputs",
aot=True)`, the key that `torch._inductor.standalone_compile(..., dynamic_shapes="from_example_inputs", aot=True)`
(aotcache's own compile path) looks up in AOTAutogradCache: fresh FakeTensorMode + TracingContext, compile_fx's
contexts, prepare_aot_config, fakeified inputs, check_cacheable, AOTAutogradCacheDetails, pickle + hash.

Graphs: bench/graphs.py (Dynamo-captured, ~100 / ~1,000 / ~10,000 nodes). Each measurement runs repetitions until
`--budget` seconds are spent (at least `--min-reps`), with a gc.collect() before each (outside the timing; the
collector stays on during it). Everything alive after set-up (torch, the graphs) is moved to the permanent generation
with gc.freeze(): a full collection over it takes ~250 ms here and would otherwise land at random in either side's
timings. Results: a table on stdout and bench/results/key_speed.json.

    .venv/bin/python bench/key_speed.py [--budget 3] [--sizes 100,1k,10k] [--no-profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import gc
import importlib
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from aotcache import _core, global_state, settings
from aotcache.capture import graph as capture

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graphs  # noqa: E402  (bench/graphs.py, next to this file)

RESULTS = Path(__file__).resolve().parent / "results"

# ---------------------------------------------------------------------------------------------------------------
# aotcache's key path, timed part by part


def aotcache_key(gm: torch.fx.GraphModule, example_inputs: list[Any], parts: dict[str, float] | None = None) -> str:
    """The key backend.py computes before its store lookup; adds each part's seconds to `parts` when given."""
    clock = time.perf_counter
    t0 = clock()
    cfg = settings.current()
    t1 = clock()
    graph = capture.capture_graph(gm)
    t2 = clock()
    inputs = capture.capture_inputs(example_inputs)
    t3 = clock()
    verdict = _core.check_graph(graph)
    t4 = clock()
    if verdict is not None:
        raise RuntimeError(f"aotcache bypasses this graph: {verdict}")
    autograd = global_state.autograd_state()
    t5 = clock()
    config = global_state.config_state({})
    t6 = clock()
    env = global_state.environment()
    t7 = clock()
    user = global_state.user_state(cfg.salt)
    t8 = clock()
    key = _core.compute_key(graph, inputs, autograd, config, env, user)
    t9 = clock()
    if parts is not None:
        for name, dt in (
            ("settings", t1 - t0),
            ("capture_graph", t2 - t1),
            ("capture_inputs", t3 - t2),
            ("check_graph", t4 - t3),
            ("autograd_state", t5 - t4),
            ("config_state", t6 - t5),
            ("environment", t7 - t6),
            ("user_state", t8 - t7),
            ("compute_key", t9 - t8),
        ):
            parts[name] = parts.get(name, 0.0) + dt
    return key.hex


# Parts grouped as in the report: Python capture (includes the per-node nanobind calls that build the C++ IR),
# C++ check + key, global state.
GROUPS = {
    "python_capture": ("capture_graph", "capture_inputs"),
    "cpp_check_and_key": ("check_graph", "compute_key"),
    "global_state": ("settings", "autograd_state", "config_state", "environment", "user_state"),
}

# ---------------------------------------------------------------------------------------------------------------
# torch's key


def _torch_key_fn() -> Callable[..., Any]:
    # torch._inductor.standalone_compile is the function; the module of the same name holds autograd_cache_key.
    return importlib.import_module("torch._inductor.standalone_compile").autograd_cache_key


def torch_key(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str:
    key, _debug_lines = _torch_key_fn()(gm, list(example_inputs), dynamic_shapes="from_example_inputs", aot=True)
    return key


class _SectionTimer:
    """Exclusive time per named section: a nested section's time is not counted in its caller's."""

    def __init__(self) -> None:
        self.exclusive: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[list[Any]] = []  # [name, start, time of nested sections]

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame = [name, time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                total = time.perf_counter() - frame[1]
                self.exclusive[name] = self.exclusive.get(name, 0.0) + total - frame[2]
                self.calls[name] = self.calls.get(name, 0) + 1
                if self._stack:
                    self._stack[-1][2] += total

        return wrapper


@contextlib.contextmanager
def _torch_sections(timer: _SectionTimer) -> Iterator[None]:
    """Wraps the stages of torch's key function (module globals it calls through) with `timer`."""
    import torch._functorch._aot_autograd.autograd_cache as autograd_cache
    import torch._functorch.aot_autograd as aot_autograd
    import torch._inductor.compile_fx as compile_fx

    targets = [
        (compile_fx, "select_decomp_table", "select_decomp_table"),
        (compile_fx, "create_compiler_config_extra", "create_compiler_config_extra"),
        (aot_autograd, "prepare_aot_config", "prepare_aot_config"),
        (aot_autograd, "construct_fake_mode", "construct_fake_mode"),
        (aot_autograd, "process_inputs", "fakeify_inputs"),
        (autograd_cache, "check_cacheable", "check_cacheable"),
        (autograd_cache.AOTAutogradCacheDetails, "__init__", "cache_details"),
        (autograd_cache.AOTAutogradCachePickler, "get_hash", "pickle_and_hash"),
        (torch.fx.GraphModule, "recompile", "gm_recompile"),
    ]
    with contextlib.ExitStack() as stack:
        for owner, attr, name in targets:
            original = getattr(owner, attr)
            stack.enter_context(mock.patch.object(owner, attr, timer.wrap(name, original)))
        yield


# ---------------------------------------------------------------------------------------------------------------
# measuring


def _repeat(fn: Callable[[], Any], budget_s: float, min_reps: int, max_reps: int) -> list[float]:
    times: list[float] = []
    spent = 0.0
    while len(times) < min_reps or (spent < budget_s and len(times) < max_reps):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return times


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


def _stats_ms(xs: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(xs) * 1e3, "p90_ms": _p90(xs) * 1e3}


def measure_aotcache(c: graphs.Captured, budget_s: float, min_reps: int, max_reps: int) -> dict[str, Any]:
    keys = {aotcache_key(c.gm, c.example_inputs)}  # warm-up
    per_rep: list[dict[str, float]] = []

    def once() -> None:
        parts: dict[str, float] = {}
        keys.add(aotcache_key(c.gm, c.example_inputs, parts))
        per_rep.append(parts)

    totals = _repeat(once, budget_s, min_reps, max_reps)
    if len(keys) != 1:
        raise RuntimeError(f"aotcache key is not deterministic for {c.name}: {keys}")
    parts_ms = {name: _stats_ms([p[name] for p in per_rep]) for name in per_rep[0]}
    groups_ms = {g: _stats_ms([sum(p[n] for n in names) for p in per_rep]) for g, names in GROUPS.items()}
    return {"reps": len(totals), **_stats_ms(totals), "key": keys.pop(), "parts": parts_ms, "groups": groups_ms}


def measure_torch(c: graphs.Captured, budget_s: float, min_reps: int, max_reps: int) -> dict[str, Any]:
    from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
    from torch._inductor.codecache import AOTAUTOGRAD_CACHE_PREFIX

    if torch._functorch.config.bypass_autograd_cache_key:
        raise RuntimeError("functorch config bypass_autograd_cache_key is set: torch would return random nonces")
    try:
        keys = {torch_key(c.gm, c.example_inputs)}  # warm-up
    except BypassAOTAutogradCache as e:
        return {"bypass": f"{type(e).__name__}: {e}"}

    def once() -> None:
        keys.add(torch_key(c.gm, c.example_inputs))

    totals = _repeat(once, budget_s, min_reps, max_reps)
    if len(keys) != 1:
        raise RuntimeError(f"torch's key is not deterministic for {c.name}: {keys}")
    key = keys.pop()
    if not key.startswith(AOTAUTOGRAD_CACHE_PREFIX):
        raise RuntimeError(f"torch's key {key!r} lacks the AOTAutogradCache prefix")

    # Where torch's time goes: a few more calls with its stages wrapped (exclusive seconds, mean per call).
    timer = _SectionTimer()
    section_reps = max(1, min(5, len(totals)))
    t0 = time.perf_counter()
    with _torch_sections(timer):
        for _ in range(section_reps):
            torch_key(c.gm, c.example_inputs)
    wall = (time.perf_counter() - t0) / section_reps
    sections = {k: v / section_reps * 1e3 for k, v in sorted(timer.exclusive.items(), key=lambda kv: -kv[1])}
    sections["rest (contexts, fake mode/tracing set-up, sanitize)"] = wall * 1e3 - sum(sections.values())
    calls = {k: v // section_reps for k, v in timer.calls.items()}
    return {
        "reps": len(totals),
        **_stats_ms(totals),
        "key": key,
        "bypass": None,
        "sections_ms": sections,
        "section_calls_per_key": calls,
    }


def split_capture(c: graphs.Captured, reps: int = 5) -> dict[str, Any]:
    """Splits the Python capture into the nanobind calls that build the C++ IR and the Python around them.

    One capture runs with `_core.Graph`, `TensorMeta`, `NodeRef` and `TorchEnum` replaced by recorders; the recorded
    calls are then replayed against the real binding and timed alone. cProfile cannot show these: nanobind functions
    are not builtins, so their time lands in the caller's own time.
    """
    real = {name: getattr(_core, name) for name in ("Graph", "TensorMeta", "NodeRef", "TorchEnum")}
    recorded: dict[str, list[tuple[tuple, dict]]] = {name: [] for name in real}

    class RecordingGraph:
        def __init__(self) -> None:
            self.n = 0

        def add_node(self, *args: Any, **kwargs: Any) -> int:
            recorded["Graph"].append((args, kwargs))
            self.n += 1
            return self.n - 1

    def recorder(name: str) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            recorded[name].append((args, kwargs))
            return real[name](*args, **kwargs)

        return make

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(_core, "Graph", RecordingGraph))
        for name in ("TensorMeta", "NodeRef", "TorchEnum"):
            stack.enter_context(mock.patch.object(_core, name, recorder(name)))
        capture.capture_graph(c.gm)
        capture.capture_inputs(c.example_inputs)

    def replay_add_node() -> None:
        g = real["Graph"]()
        for args, kwargs in recorded["Graph"]:
            g.add_node(*args, **kwargs)

    def replay(name: str) -> Callable[[], None]:
        def run() -> None:
            cls = real[name]
            for args, kwargs in recorded[name]:
                cls(*args, **kwargs)

        return run

    def median_ms(fn: Callable[[], Any]) -> float:
        return statistics.median(_repeat(fn, 0.0, reps, reps)) * 1e3

    out = {
        "capture_graph_ms": median_ms(lambda: capture.capture_graph(c.gm)),
        "capture_inputs_ms": median_ms(lambda: capture.capture_inputs(c.example_inputs)),
        "Graph.add_node_ms": median_ms(replay_add_node),
    }
    for name in ("TensorMeta", "NodeRef", "TorchEnum"):
        out[f"{name}()_ms"] = median_ms(replay(name))
    out["calls"] = {("Graph.add_node" if k == "Graph" else f"{k}()"): len(v) for k, v in recorded.items()}
    binding = sum(v for k, v in out.items() if k.endswith("()_ms") or k == "Graph.add_node_ms")
    out["python_rest_ms"] = out["capture_graph_ms"] + out["capture_inputs_ms"] - binding
    return out


def profile_capture(c: graphs.Captured, reps: int = 5) -> dict[str, Any]:
    """cProfile of aotcache's Python capture on one graph: top functions by own time and by cumulative time."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        capture.capture_graph(c.gm)
        capture.capture_inputs(c.example_inputs)
    prof.disable()
    out = {}
    for order in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(order).print_stats(25)
        out[order] = buf.getvalue()
    path = RESULTS / f"profile_capture_{c.name}.txt"
    path.write_text(
        f"cProfile of capture_graph + capture_inputs, {c.nodes} nodes, {reps} repetitions\n\n"
        + "\n".join(f"=== sorted by {k} ===\n{v}" for k, v in out.items())
    )
    return {"file": str(path.relative_to(RESULTS.parent.parent)), "reps": reps}


# ---------------------------------------------------------------------------------------------------------------
# report


def machine_info() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "torch_git": torch.version.git_version,
        "aotcache": _core.__version__,
        "torch_threads": torch.get_num_threads(),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def print_table(results: list[dict[str, Any]]) -> None:
    head = (
        f"{'size':>5} {'nodes':>6} {'inputs':>6} | {'aotcache ms':>11} {'p90':>7} {'n':>4} | "
        f"{'torch ms':>9} {'p90':>8} {'n':>4} | {'torch/aot':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        a, t = r["aotcache"], r["torch"]
        if t.get("bypass"):
            tcols, ratio = f"{'bypass':>9} {'':>8} {'':>4}", "-"
        else:
            tcols = f"{t['median_ms']:>9.2f} {t['p90_ms']:>8.2f} {t['reps']:>4}"
            ratio = f"{r['ratio_torch_over_aotcache']:.1f}x"
        print(
            f"{r['size']:>5} {r['nodes']:>6} {r['inputs']:>6} | {a['median_ms']:>11.2f} {a['p90_ms']:>7.2f} "
            f"{a['reps']:>4} | {tcols} | {ratio:>9}"
        )

    print("\naotcache breakdown, median ms per part (share of the median total)")
    names = list(results[0]["aotcache"]["parts"])
    print(f"{'part':<16}" + "".join(f"{r['size']:>16}" for r in results))
    for name in names + list(GROUPS):
        if name == next(iter(GROUPS)):
            print(f"{'-- groups':<16}")
        row = []
        for r in results:
            a = r["aotcache"]
            med = (a["parts"] if name in a["parts"] else a["groups"])[name]["median_ms"]
            row.append(f"{med:>8.3f} ({100 * med / a['median_ms']:>3.0f}%)")
        print(f"{name:<16}" + "".join(f"{x:>16}" for x in row))

    print("\naotcache Python capture split, median ms (binding calls replayed alone; the rest is Python)")
    keys = ["capture_graph_ms", "capture_inputs_ms", "Graph.add_node_ms", "TensorMeta()_ms", "NodeRef()_ms"]
    keys += ["TorchEnum()_ms", "python_rest_ms"]
    print(f"{'':<18}" + "".join(f"{r['size']:>16}" for r in results))
    for k in keys:
        row = []
        for r in results:
            sp = r["capture_split"]
            n = sp["calls"].get(k.removesuffix("_ms"))
            row.append(f"{sp[k]:>7.2f}" + (f" ({n:>6})" if n is not None else " " * 9))
        print(f"{k.removesuffix('_ms'):<18}" + "".join(f"{x:>16}" for x in row))

    print("\ntorch breakdown, mean ms per key (exclusive time of each stage; calls per key)")
    for r in results:
        t = r["torch"]
        if t.get("bypass"):
            print(f"  {r['size']}: bypass: {t['bypass']}")
            continue
        items = ", ".join(
            f"{k} {v:.1f}"
            + (f" (x{t['section_calls_per_key'][k]})" if t["section_calls_per_key"].get(k, 1) > 1 else "")
            for k, v in t["sections_ms"].items()
        )
        print(f"  {r['size']}: {items}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per measurement (per size and side)")
    parser.add_argument("--min-reps", type=int, default=5)
    parser.add_argument("--max-reps", type=int, default=2000)
    parser.add_argument("--sizes", default=",".join(graphs.SIZES), help="comma-separated subset of graphs.SIZES")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile of the largest graph's capture")
    parser.add_argument("--json", default=str(RESULTS / "key_speed.json"))
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    load_at_start = round(os.getloadavg()[0], 2)

    # One-time costs, in this order, before anything else asks for them.
    t0 = time.perf_counter()
    global_state.environment()  # probes the ATen CPU capability once per process (functools.cache)
    env_first_ms = (time.perf_counter() - t0) * 1e3

    sizes = {s: graphs.SIZES[s] for s in args.sizes.split(",")}
    captured = []
    for name, blocks in sizes.items():
        c = graphs.capture(name, blocks)
        print(f"captured {name}: {c.nodes} nodes, {len(c.example_inputs)} inputs, Dynamo {c.dynamo_seconds:.1f}s")
        captured.append(c)

    first = captured[0]
    t0 = time.perf_counter()
    aotcache_key(first.gm, first.example_inputs)
    aot_first_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    try:
        torch_key(first.gm, first.example_inputs)
    except Exception as e:  # reported per size below
        print(f"torch's first key call raised {e!r}")
    torch_first_ms = (time.perf_counter() - t0) * 1e3
    gc.collect()
    gc.freeze()
    print(
        f"one-time: global_state.environment() first call {env_first_ms:.1f} ms; first aotcache key "
        f"({first.name}) {aot_first_ms:.1f} ms; first torch key ({first.name}) {torch_first_ms:.1f} ms\n"
    )

    results = []
    for c in captured:
        a = measure_aotcache(c, args.budget, args.min_reps, args.max_reps)
        t = measure_torch(c, args.budget, args.min_reps, args.max_reps)
        ratio = None if t.get("bypass") else t["median_ms"] / a["median_ms"]
        split = split_capture(c)
        results.append(
            {
                "size": c.name,
                "blocks": c.blocks,
                "nodes": c.nodes,
                "inputs": len(c.example_inputs),
                "op_counts": c.op_counts(),
                "dynamo_capture_s": round(c.dynamo_seconds, 2),
                "aotcache": a,
                "torch": t,
                "ratio_torch_over_aotcache": ratio,
                "capture_split": split,
            }
        )
        print(f"measured {c.name}: aotcache {a['median_ms']:.2f} ms, torch {t.get('median_ms', float('nan')):.2f} ms")

    for side in ("aotcache", "torch"):
        keys = [r[side]["key"] for r in results if r[side].get("key")]
        if len(set(keys)) != len(keys):
            raise RuntimeError(f"{side} gave two different graphs the same key: {keys}")
    profile = None if args.no_profile else profile_capture(captured[-1])
    print()
    print_table(results)
    if profile:
        print(f"\ncProfile of the {captured[-1].name} capture: {profile['file']}")

    report = {
        "machine": {**machine_info(), "loadavg_1m_at_start": load_at_start},
        "method": {
            "aotcache": "settings.current + capture_graph + capture_inputs + check_graph + autograd_state + "
            "config_state({}) + environment + user_state + compute_key (backend.py up to the store lookup)",
            "torch": "torch._inductor.standalone_compile.autograd_cache_key(gm, inputs, "
            "dynamic_shapes='from_example_inputs', aot=True)",
            "timing": f"time.perf_counter, gc.collect() before each repetition, budget {args.budget}s per "
            f"measurement, min {args.min_reps} reps, one warm-up call each, gc.freeze() after set-up",
        },
        "one_time_ms": {
            "environment_first_call": env_first_ms,
            "aotcache_first_key": aot_first_ms,
            "torch_first_key": torch_first_ms,
            "first_key_graph": first.name,
        },
        "results": results,
        "profile": profile,
    }
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
