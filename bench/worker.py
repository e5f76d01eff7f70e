"""One measurement in a fresh process: compile one workload of bench/models.py and time its first result.

    .venv/bin/python bench/worker.py MODEL BACKEND OUT.json      (BACKEND: inductor | aotcache)

The parent (bench/run.py) points the caches through the environment (AOTCACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
TORCHINDUCTOR_FX_GRAPH_CACHE=1 and TORCHINDUCTOR_AUTOGRAD_CACHE=1 for torch's runs) and passes --torch-caches-off
for aotcache's runs. The worker writes to OUT.json: wall-clock phases,
Dynamo's compile-time metrics, aotcache's per-compile log figures (key, lookup, load; on a miss compile, store and
serialization), a few timed probes inside torch (vector-ISA probe, C++ builds, compiler version), aotcache.stats(),
torch's cache counters (and its remote caches' own hit/miss/put counters), the first step's output checksum (SHA-256
of the outputs and gradients, computed outside the timings) and the peak RSS. --deterministic: as the demo,
torch.use_deterministic_algorithms(True) (bench/remote_vs_torch.py compares checksums across processes).
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch._functorch.config  # noqa: E402
import torch._inductor.config  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402  (bench/models.py)


class Probes:
    """Inclusive seconds and calls of a few functions inside torch and aotcache, wrapped for this process."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, name: str, dt: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + dt
        self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - t0)

        setattr(owner, attr, wrapper)


def _compile_file_count() -> int:
    from torch._dynamo.utils import compilation_time_metrics

    return len(compilation_time_metrics.get("compile_file", []))


def install_probes(probes: Probes, backend: str) -> None:
    import torch._inductor.cpu_vec_isa as cpu_vec_isa
    from torch._inductor import cpp_builder

    # The vector-ISA probe: builds up to six probe libraries into the Inductor cache dir (when not there yet) and
    # dlopens each in a child Python. functools.cache'd: only the first call costs.
    cached = cpu_vec_isa.valid_vec_isa_list
    timed: dict[str, Any] = {}

    def valid_vec_isa_list() -> Any:
        if "v" not in timed:
            n0 = _compile_file_count()
            t0 = time.perf_counter()
            timed["v"] = cached()
            probes.add("vec_isa_probe", time.perf_counter() - t0)
            probes.calls["vec_isa_probe.builds"] = _compile_file_count() - n0
        return timed["v"]

    cpu_vec_isa.valid_vec_isa_list = valid_vec_isa_list
    probes.wrap(cpu_vec_isa.VecISA, "_probe_load", "vec_isa_probe.dlopen_child")
    probes.wrap(cpp_builder, "get_compiler_version_info", "cxx_version")
    if backend == "aotcache":
        from torch._inductor.standalone_compile import AOTCompiledArtifact

        from aotcache import compiler, global_state

        probes.wrap(global_state, "environment", "aotcache.environment")
        probes.wrap(global_state, "config_state", "aotcache.config_state")
        probes.wrap(compiler, "load_serialized", "aotcache.deserialize")
        probes.wrap(AOTCompiledArtifact, "serialize", "aotcache.serialize")
        # The frame cache's own work per frame (its key, its lookup, recording after a trace): outside the graph
        # pipeline's INFO lines. The frame key of a process's first frame runs the vector-ISA probe (environment).
        from aotcache.frames import hooks

        probes.wrap(hooks, "_frame_of", "aotcache.frame_key")
        probes.wrap(hooks, "_load", "aotcache.frame_lookup")
        probes.wrap(hooks, "_record", "aotcache.frame_record")


class AotcacheLog(logging.Handler):
    """Collects aotcache's one INFO line per compile: hit/miss/bypass with its times in ms."""

    _FIELD = re.compile(r"(\w+)=([0-9.]+)ms")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        kind = msg.split(" ", 1)[0]
        if msg.startswith("frame hit "):  # a frame served from the frame cache: no Dynamo tracing, its graphs loaded
            kind = "frame_hit"
        elif kind not in ("hit", "miss", "bypass"):
            return
        event: dict[str, Any] = {"kind": kind, **{k: float(v) / 1e3 for k, v in self._FIELD.findall(msg)}}
        if kind == "bypass":
            event["reason"] = msg.split("reason=", 1)[1].split(" ", 1)[0].rstrip(":")
        self.events.append(event)


def output_checksum(out: Any, model: torch.nn.Module) -> dict[str, Any]:
    """SHA-256 of the first step's output tensors and of the parameters' gradients (training steps), and their sum:
    equal digests = bit-identical results across processes and systems."""
    tensors = [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]
    tensors += [p.grad for p in model.parameters() if p.grad is not None]
    digest = hashlib.sha256()
    total = 0.0
    for t in tensors:
        t = t.detach().contiguous().cpu()
        digest.update(t.numpy().tobytes())
        total += float(t.double().sum())
    return {"sha256": digest.hexdigest(), "sum": total, "tensors": len(tensors)}


def torch_remote_cache_stats() -> dict[str, dict[str, int]]:
    """torch's own per-cache counters (hit, miss, put, exception) of its remote caches (RemoteFxGraphCache,
    RemoteAOTAutogradCache, ...); empty when no remote cache was created."""
    import dataclasses

    from torch._inductor.remote_cache import cache_stats

    return {name: dataclasses.asdict(stat) for name, stat in cache_stats._stats.items()}


def _barrier(directory: str, count: str, timeout_s: float = 600) -> None:
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / str(os.getpid())).touch()
    deadline = time.monotonic() + timeout_s
    while len(list(Path(directory).iterdir())) < int(count):
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {directory}: fewer than {count} workers after {timeout_s}s")
        time.sleep(0.01)


def _sum(events: list[dict[str, Any]], kind: str, field: str) -> float:
    return sum(e.get(field, 0.0) for e in events if e["kind"] == kind)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=sorted(models.WORKLOADS))
    parser.add_argument("backend", choices=("inductor", "aotcache"))
    parser.add_argument("out")
    parser.add_argument(
        "--torch-caches-off",
        action="store_true",
        help="switch torch's FX graph and AOTAutograd caches off in Python config, not with the environment: "
        "TORCHINDUCTOR_FX_GRAPH_CACHE=0 or TORCHINDUCTOR_AUTOGRAD_CACHE=0 forces a config, aotcache's sandboxed "
        "compile then cannot serialize, and every graph bypasses as not_serializable",
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="torch.use_deterministic_algorithms(True) (as the demo): Inductor's CPU embedding backward otherwise "
        "accumulates with atomics in thread order and two runs of the same code differ in the last bits",
    )
    parser.add_argument(
        "--barrier",
        help="DIR:N: after the imports and the model build, wait until N workers reached DIR, then compile "
        "(bench/single_flight.py starts several at once); first_result_s counts from the release",
    )
    args = parser.parse_args()
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    if args.torch_caches_off:
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    workload = models.WORKLOADS[args.model]

    log = None
    aotcache_stats = None
    if args.backend == "aotcache":
        import aotcache  # imported here so that import_s counts it

        aotcache_stats = aotcache.stats

        log = AotcacheLog()
        logger = logging.getLogger("aotcache")
        logger.addHandler(log)
        logger.setLevel(logging.INFO)
    t_imported = time.perf_counter()
    probes = Probes()
    install_probes(probes, args.backend)

    model, step = workload.build()
    if args.barrier:
        _barrier(*args.barrier.rsplit(":", 1))
    t_built = time.perf_counter()
    compiled = torch.compile(model, backend=args.backend)
    first_out = step(compiled)
    t_first = time.perf_counter()
    checksum = output_checksum(first_out, model)  # outside the timings
    t_check = time.perf_counter()
    step(compiled)  # steady state: no compile
    t_second = time.perf_counter()

    from torch._dynamo.utils import compilation_time_metrics, counters

    metrics = {k: sum(v) for k, v in compilation_time_metrics.items()}
    dynamo_total = metrics.get("_compile.compile_inner", 0.0)
    backend_s = metrics.get("OutputGraph.call_user_compiler", 0.0)
    first_result_s = t_first - t_built
    events = log.events if log else []
    phases = {
        "dynamo_s": dynamo_total - backend_s,  # bytecode tracing, guards, Dynamo's graph passes
        "backend_s": backend_s,  # the backend's compile call(s): load on a hit, AOTAutograd + Inductor on a miss
        # executing the step, plus anything compiled lazily at run time (frames served by the frame cache load
        # outside Dynamo's compile metrics: their load is its own phase)
        "run_s": first_result_s - dynamo_total - _sum(events, "frame_hit", "load"),
    }
    if log:
        phases.update(
            {
                "key_s": sum(e.get("key_time", 0.0) for e in events if e["kind"] in ("hit", "miss")),
                "lookup_s": _sum(events, "hit", "lookup"),
                "load_s": _sum(events, "hit", "load"),
                "miss_compile_s": _sum(events, "miss", "compile"),
                "miss_store_s": _sum(events, "miss", "store"),
                "miss_total_s": _sum(events, "miss", "total"),
                "bypass_compile_s": _sum(events, "bypass", "compile"),
                "frame_load_s": _sum(events, "frame_hit", "load"),
                "frame_hits": sum(1 for e in events if e["kind"] == "frame_hit"),
            }
        )
    usage_self = resource.getrusage(resource.RUSAGE_SELF)
    usage_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    keep_torch = (
        "autograd_cache_hit",
        "autograd_cache_miss",
        "autograd_cache_bypass",
        "autograd_cache_saved",
        "fxgraph_cache_hit",
        "fxgraph_cache_miss",
        "fxgraph_cache_bypass",
    )
    torch_counters = {
        k: v for group in ("aot_autograd", "inductor") for k, v in counters[group].items() if k in keep_torch
    }
    result = {
        "model": args.model,
        "backend": args.backend,
        "torch_caches": "off" if args.torch_caches_off else "on",
        "import_s": t_imported - T_START,
        "setup_s": t_built - t_imported,
        "first_result_s": first_result_s,
        "second_step_s": t_second - t_check,
        "worker_total_s": time.perf_counter() - T_START,
        "phases": phases,
        "graphs": len(compilation_time_metrics.get("_compile.compile_inner", [])),
        "aotcache_events": events,
        "aotcache_stats": aotcache_stats() if aotcache_stats else None,
        "torch_counters": torch_counters,
        "torch_remote_cache_stats": torch_remote_cache_stats(),
        "output_checksum": checksum,
        "probes": {"seconds": probes.seconds, "calls": probes.calls},
        "compile_file": {
            "count": len(compilation_time_metrics.get("compile_file", [])),
            "seconds": metrics.get("compile_file", 0.0),
        },
        "torch_metrics_s": {k: round(v, 4) for k, v in sorted(metrics.items(), key=lambda kv: -kv[1])[:25]},
        "max_rss_mb": usage_self.ru_maxrss / 1024,
        "children_max_rss_mb": usage_children.ru_maxrss / 1024,
        "cpu_s": usage_self.ru_utime + usage_self.ru_stime,
        "children_cpu_s": usage_children.ru_utime + usage_children.ru_stime,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
