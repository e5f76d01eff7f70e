"""One fresh process running adversarial cases (adversarial_cases.py) under one backend.

usage: adversarial_worker.py MODE OUT_DIR [--label LABEL] [--eager] [CASE...]

MODE is `inductor` (torch's FX graph and AOTAutograd caches off, so every graph is really compiled) or `aotcache`
(AOTCACHE_DIR and TORCHINDUCTOR_CACHE_DIR set by the caller). Each case runs after torch._dynamo.reset() with the
process's global state restored afterwards; an exception is caught, recorded and counted as the case's failure.
Writes OUT_DIR/<case>.<label>.pt (label defaults to MODE; with --eager also <case>.eager.pt: the same program under
backend="eager") and prints one line per case, `CASE {json}`: the case's delta of aotcache.stats() (hits, misses,
bypasses, errors, bypass_reasons, error_kinds, ...), Dynamo's graph and graph-break counts, aotcache's warnings,
the "fact.*" values the case returned, and the exception if any.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
import warnings
from typing import Any

import torch
from torch._dynamo.utils import counters

import aotcache
from adversarial_cases import BY_NAME, CASES, Case
from stats_delta import delta

CASE_TIMEOUT_S = 300


class CaseTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise CaseTimeout(f"case ran over {CASE_TIMEOUT_S}s")


def _dynamo_counts() -> dict[str, int]:
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


class _Capture(logging.Handler):
    """aotcache's log records of one case: WARNING and above in `warnings`, INFO lines kept short in `info`."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.warnings: list[str] = []
        self.info: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            e = record.exc_info[1]
            text += f" [{type(e).__name__}: {str(e)[:600]}]"
        if record.levelno >= logging.WARNING:
            self.warnings.append(text[:1500])
        elif len(self.info) < 40:
            self.info.append(text[:300])


def _global_state() -> tuple:
    return (
        dict(os.environ),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.get_num_threads(),
    )


def _restore(state: tuple) -> None:
    env, deterministic, dtype, grad, threads = state
    for k in set(os.environ) - set(env):
        del os.environ[k]
    os.environ.update(env)
    torch.use_deterministic_algorithms(deterministic)
    torch.set_default_dtype(dtype)
    torch.set_grad_enabled(grad)
    torch.set_num_threads(threads)
    aotcache.settings.reset()


def run_one(case: Case, backend: str, out_path: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.name, "backend": backend}
    state = _global_state()
    capture = _Capture()
    logger = logging.getLogger("aotcache")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(capture)
    torch._dynamo.reset()
    stats_before, dynamo_before = aotcache.stats(), _dynamo_counts()
    t0 = time.perf_counter()
    signal.alarm(CASE_TIMEOUT_S)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = case.run(backend)
        row["py_warnings"] = [str(w.message)[:500] for w in caught if "aotcache" in (w.filename + str(w.message))]
        row["facts"] = {k: v for k, v in results.items() if k.startswith("fact.")}
        results = {k: v for k, v in results.items() if not k.startswith("fact.")}
        if out_path:
            torch.save(results, out_path)
    except BaseException as e:  # every exception is the case's failure, recorded; a timeout too
        if isinstance(e, KeyboardInterrupt):
            raise
        row["exception"] = f"{type(e).__module__}.{type(e).__qualname__}: {str(e)[:3000]}"
        row["traceback"] = traceback.format_exc()[-4000:]
    finally:
        signal.alarm(0)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        logger.removeHandler(capture)
        logger.setLevel(old_level)
        torch._dynamo.reset()
        _restore(state)
    stats = delta(aotcache.stats(), stats_before)
    row["stats"] = stats
    for name in ("hits", "misses", "bypasses", "errors"):
        row[name] = stats.get(name, 0)
    for name in ("bypass_reasons", "error_kinds", "miss_reasons"):
        row[name] = stats.get(name, {})
    row["dynamo"] = {k: v - dynamo_before[k] for k, v in _dynamo_counts().items()}
    row["warnings"] = capture.warnings
    row["log"] = capture.info
    return row


def main() -> None:
    mode, out_dir = sys.argv[1], sys.argv[2]
    if mode not in ("inductor", "aotcache"):
        raise SystemExit(f"MODE must be inductor or aotcache, not {mode!r}")
    rest = sys.argv[3:]
    label = mode
    if "--label" in rest:
        i = rest.index("--label")
        label = rest[i + 1]
        del rest[i : i + 2]
    with_eager = "--eager" in rest
    names = [a for a in rest if not a.startswith("--")] or [c.name for c in CASES]
    if mode == "inductor":  # the uncached reference: torch's own caches must not serve anything
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    signal.signal(signal.SIGALRM, _on_alarm)
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        case = BY_NAME[name]
        row = run_one(case, mode, os.path.join(out_dir, f"{name}.{label}.pt"))
        row["label"] = label
        if with_eager and case.eager_tol is not None:
            eager = run_one(case, case.eager_backend, os.path.join(out_dir, f"{name}.eager.pt"))
            row["eager_exception"] = eager.get("exception")
        print("CASE " + json.dumps(row, default=repr), flush=True)


if __name__ == "__main__":
    main()
