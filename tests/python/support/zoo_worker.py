"""One fresh process running zoo items (zoo_models.py) under one backend, measured per item.

usage: zoo_worker.py BACKEND OUT_DIR [--label LABEL] [--timeout S] MODEL:WORKLOAD...

BACKEND:
  aotcache             backend "aotcache" (AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR set by the caller); torch's FX
                       graph and AOTAutograd caches off in Python config (aotcache sandboxes them anyway)
  inductor             backend "inductor", torch's caches off: every graph really compiled (the uncached reference)
  inductor-cached      backend "inductor", torch's FX graph + AOTAutograd caches on; needs its own
                       TORCHINDUCTOR_CACHE_DIR
  eager                no torch.compile (the floor); imports nothing of Dynamo or Inductor
  inductor-mega        inductor-cached plus torch's mega-cache: where $ZOO_MEGA_FILE exists, its artifacts are loaded
                       (torch.compiler.load_cache_artifacts) inside the measured window, before the first call; else
                       they are saved there (save_cache_artifacts) after the item
  inductor-precompile  inductor-cached with Dynamo's caching_precompile on (TORCH_CACHING_PRECOMPILE=1)
  aot-compile          torch.compile(model, fullgraph=True) AOT-compiled, saved to / loaded from $ZOO_AOT_FILE
                       (zoo_models.AOT_COMPILE; train and infer only)

Each item runs after torch._dynamo.reset() under torch.use_deterministic_algorithms(True); its model is built
first (not timed), then the timed call compiles and runs it. An exception (or running over --timeout, default
600 s) is caught and recorded as the item's failure. Writes OUT_DIR/<model>.<workload>.<label>.pt (label defaults to
BACKEND) and prints one line per item, `ZOO {json}`: first_result_s (compile + run of the item), to_first_result_s
(process start to the first result, less the model's build: the imports a compile path adds count here), the
item's deltas of
aotcache.stats() (hits, misses, bypasses, bypass_reasons, errors, error_kinds, internal_errors, miss_reasons), of
torch's cache counters and of Dynamo's compile-time metrics (torch._dynamo.utils.compilation_time_metrics, the dict
behind compile_times()), the phases derived from them (Dynamo bytecode tracing, guard building, backend; for
aotcache the key, lookup and load times of its INFO lines), aotcache's warnings, and the exception if any.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import zoo_models  # noqa: E402
from stats_delta import delta  # noqa: E402

BACKENDS = ("aotcache", "inductor", "inductor-cached", "eager", "inductor-mega", "inductor-precompile", "aot-compile")
CACHED = ("inductor-cached", "inductor-mega", "inductor-precompile", "aot-compile")  # torch's caches on
MEGA_FILE = "ZOO_MEGA_FILE"
EAGER = False  # set in main(): nothing of Dynamo is imported then (the floor pays for none of it)
TORCH_CACHE_COUNTERS = (
    "autograd_cache_hit",
    "autograd_cache_miss",
    "autograd_cache_bypass",
    "fxgraph_cache_hit",
    "fxgraph_cache_miss",
    "fxgraph_cache_bypass",
)


class ItemTimeout(Exception):
    pass


class AotcacheLog(logging.Handler):
    """aotcache's records of one item: its INFO line per compile (hit/miss/bypass with times, ms -> s) and warnings."""

    _FIELD = re.compile(r"(\w+)=([0-9.]+)ms")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.events: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            if record.exc_info and record.exc_info[1] is not None:
                msg += f" [{type(record.exc_info[1]).__name__}: {str(record.exc_info[1])[:600]}]"
            self.warnings.append(msg[:1500])
            return
        kind = msg.split(" ", 1)[0]
        if msg.startswith("frame hit "):
            kind = "frame_hit"
        elif kind not in ("hit", "miss", "bypass"):
            return
        event: dict[str, Any] = {"kind": kind, **{k: float(v) / 1e3 for k, v in self._FIELD.findall(msg)}}
        if kind == "bypass":
            event["reason"] = msg.split("reason=", 1)[1].split(" ", 1)[0].rstrip(":")
        self.events.append(event)


def _metrics() -> dict[str, tuple[int, float]]:
    if EAGER:
        return {}
    from torch._dynamo.utils import compilation_time_metrics

    return {k: (len(v), sum(v)) for k, v in compilation_time_metrics.items()}


def _metrics_delta(before: dict[str, tuple[int, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for k, (n, s) in _metrics().items():
        n0, s0 = before.get(k, (0, 0.0))
        if n > n0:
            out[k] = {"calls": n - n0, "seconds": round(s - s0, 6)}
    return out


def _torch_counters() -> dict[str, int]:
    if EAGER:
        return {}
    from torch._dynamo.utils import counters

    return {
        k: int(v) for g in ("aot_autograd", "inductor") for k, v in counters[g].items() if k in TORCH_CACHE_COUNTERS
    }


def _dynamo_counts() -> dict[str, int]:
    if EAGER:
        return {"graphs": 0, "graph_breaks": 0}
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


def _phases(first_result_s: float, times: dict[str, dict[str, float]], events: list[dict[str, Any]]) -> dict:
    """Where the item's time went. Dynamo = its frame compiles less the backend calls (bytecode tracing, guard
    building, the rest of Dynamo); run = the rest of the call (execution, backward, lazy compiles at run time)."""

    def s(key: str) -> float:
        return times.get(key, {}).get("seconds", 0.0)

    frames, backend = s("_compile.compile_inner"), s("OutputGraph.call_user_compiler")
    tracing, guards = s("bytecode_tracing"), s("build_guards")
    phases = {
        "dynamo_s": frames - backend,
        "tracing_s": tracing,
        "guards_s": guards,
        "dynamo_other_s": max(frames - backend - tracing - guards, 0.0),
        "backend_s": backend,
        "run_s": max(
            first_result_s - frames - sum(e.get("load", 0.0) for e in events if e["kind"] == "frame_hit"), 0.0
        ),
        "cxx_builds": int(times.get("compile_file", {}).get("calls", 0)),
    }
    if events:

        def total(kinds: tuple[str, ...], field: str) -> float:
            return sum(e.get(field, 0.0) for e in events if e["kind"] in kinds)

        phases.update(
            key_s=total(("hit", "miss"), "key_time"),
            lookup_s=total(("hit",), "lookup"),
            load_s=total(("hit",), "load"),
            hit_total_s=total(("hit",), "total"),
            miss_compile_s=total(("miss",), "compile"),
            miss_store_s=total(("miss",), "store"),
            bypass_compile_s=total(("bypass",), "compile"),
            frame_load_s=total(("frame_hit",), "load"),
            frame_hits=sum(1 for e in events if e["kind"] == "frame_hit"),
        )
    return phases


class GcTimer:
    """Time spent in garbage collections while installed (gc.callbacks), and how many were full (generation 2)."""

    def __init__(self) -> None:
        self.seconds, self.full, self.collections = 0.0, 0, 0
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1
            self.full += info.get("generation") == 2
            self._started = None


def _on_alarm(signum: int, frame: Any) -> None:
    raise ItemTimeout("item ran over its time limit")


def _compile_backend(backend: str) -> str:
    """The zoo_models backend of a worker BACKEND."""
    if backend == "aotcache":
        return "aotcache"
    if backend == "eager":
        return zoo_models.EAGER
    if backend == "aot-compile":
        return zoo_models.AOT_COMPILE
    return "inductor"


def run_item(item: str, backend: str, label: str, out_dir: str, timeout_s: int) -> dict[str, Any]:
    model, workload = item.split(":")
    row: dict[str, Any] = {"item": item, "model": model, "workload": workload, "backend": backend, "label": label}
    stats = None
    if backend == "aotcache":
        import aotcache

        stats = aotcache.stats
    log = AotcacheLog()
    logger = logging.getLogger("aotcache")
    logger.addHandler(log)
    logger.setLevel(logging.INFO)
    if not EAGER:
        torch._dynamo.reset()
    stats_before = stats() if stats else {}
    torch_before, dynamo_before, metrics_before = _torch_counters(), _dynamo_counts(), _metrics()
    first_result_s = 0.0
    gc_timer: GcTimer | None = None
    signal.alarm(timeout_s)
    try:
        t0 = time.perf_counter()
        mega = os.environ.get(MEGA_FILE) if backend == "inductor-mega" else None
        gc_timer = GcTimer()
        with zoo_models.deterministic():
            call = zoo_models.prepare(item, _compile_backend(backend))
            t1 = time.perf_counter()
            if mega and os.path.exists(mega):  # the warm start of the mega-cache: its load is part of it
                with open(mega, "rb") as f:
                    torch.compiler.load_cache_artifacts(f.read())
            gc.callbacks.append(gc_timer)
            try:
                results = call()
            finally:
                gc.callbacks.remove(gc_timer)
        t2 = time.perf_counter()
        first_result_s = t2 - t1
        row["build_s"] = t1 - t0
        row["to_first_result_s"] = t2 - T_START - (t1 - t0)
        if mega and not os.path.exists(mega):  # the cold process: its artifacts for the next one
            saved = torch.compiler.save_cache_artifacts()
            if saved is None:
                raise RuntimeError("torch.compiler.save_cache_artifacts() saved nothing")
            with open(mega, "wb") as f:
                f.write(saved[0])
        torch.save(results, os.path.join(out_dir, f"{model}.{workload}.{label}.pt"))
    except BaseException as e:  # every exception is the item's failure, recorded; a timeout too
        if isinstance(e, KeyboardInterrupt):
            raise
        row["exception"] = f"{type(e).__module__}.{type(e).__qualname__}: {str(e)[:3000]}"
        row["traceback"] = traceback.format_exc()[-4000:]
    finally:
        signal.alarm(0)
        logger.removeHandler(log)
        times = _metrics_delta(metrics_before)  # before the reset: it clears Dynamo's compile-time metrics
        if not EAGER:
            torch._dynamo.reset()
    stats_delta = delta(stats(), stats_before) if stats else {}
    row["first_result_s"] = first_result_s
    if gc_timer is not None:
        row["gc"] = {"seconds": gc_timer.seconds, "full": gc_timer.full, "collections": gc_timer.collections}
    row["stats"] = stats_delta
    for name in ("hits", "misses", "bypasses", "errors"):
        row[name] = stats_delta.get(name, 0)
    for name in ("bypass_reasons", "error_kinds", "internal_errors", "miss_reasons"):
        row[name] = stats_delta.get(name, {})
    row["torch_counters"] = delta(_torch_counters(), torch_before)
    row["dynamo"] = {k: v - dynamo_before[k] for k, v in _dynamo_counts().items()}
    row["compile_times"] = times
    row["phases"] = _phases(first_result_s, times, log.events)
    row["aotcache_events"] = log.events
    row["warnings"] = log.warnings
    return row


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 3 or args[0] not in BACKENDS:
        raise SystemExit(__doc__)
    backend, out_dir, rest = args[0], args[1], args[2:]
    label, timeout_s = backend, 600
    for flag in ("--label", "--timeout"):
        if flag in rest:
            i = rest.index(flag)
            if flag == "--label":
                label = rest[i + 1]
            else:
                timeout_s = int(rest[i + 1])
            del rest[i : i + 2]
    items = zoo_models.parse_items(",".join(rest))
    global EAGER
    EAGER = backend == "eager"
    cached = backend in CACHED
    if cached and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        raise SystemExit(f"{backend} needs its own TORCHINDUCTOR_CACHE_DIR")
    if backend == "inductor-mega" and not os.environ.get(MEGA_FILE):
        raise SystemExit(f"inductor-mega needs ${MEGA_FILE}")
    if not EAGER:
        import torch._functorch.config
        import torch._inductor.config

        torch._inductor.config.fx_graph_cache = cached
        torch._functorch.config.enable_autograd_cache = cached
    if backend == "inductor-precompile":
        import torch._dynamo.config

        torch._dynamo.config.caching_precompile = True
    if backend == "aotcache":
        import aotcache  # noqa: F401  (counted in import_s, not in the first item)
    signal.signal(signal.SIGALRM, _on_alarm)
    os.makedirs(out_dir, exist_ok=True)
    process = {"pid": os.getpid(), "import_s": time.perf_counter() - T_START}
    for item in items:
        row = run_item(item, backend, label, out_dir, timeout_s)
        row["process"] = process
        print("ZOO " + json.dumps(row, default=repr), flush=True)


if __name__ == "__main__":
    main()
