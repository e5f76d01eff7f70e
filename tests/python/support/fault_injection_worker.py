"""One fresh process that makes each internal step of aotcache's pipeline raise in turn and checks the user's call.

usage: fault_injection_worker.py WORK_DIR [PHASE...]

For every phase (PHASES below) the step's function is replaced by one that raises `InjectedFault`, then a static
graph (an MLP training step) and a symbolic graph (dynamic=True, two sizes) are compiled with backend="aotcache" on
a cache directory in the state the phase needs (empty for the steps of a miss, filled for the steps of a hit), and
their results compared bitwise with backend="inductor"'s on the same inputs. Prints one line per phase:
RESULT {"phase", "escaped" (the exception that reached the caller, or null), "equal", "internal_errors",
"stats" (the aotcache.stats() delta), "fired" (how many times the fault was raised)}.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import traceback
from pathlib import Path

import torch

import aotcache
from aotcache import _core, compiler, counters, global_state, guarded, kernels, settings
from aotcache.capture import graph as capture
from aotcache.storage import single_flight
from aotcache.storage.tiered import TieredStore
from stats_delta import delta


class InjectedFault(RuntimeError):
    pass


# phase -> (owner, attribute to replace, cache state the phase needs: "empty" or "filled", graphs it concerns)
PHASES = {
    "request": (settings, "current", "filled", "both"),
    "capture": (capture, "capture_graph", "filled", "both"),
    "check": (_core, "check_graph", "filled", "both"),
    "key": (global_state, "autograd_state", "filled", "both"),
    "lookup": (TieredStore, "get_local", "filled", "both"),
    "remote": (TieredStore, "get_remote", "empty", "both"),
    "guard_selection": (guarded, "select", "filled", "symbolic"),
    "guard_installation": (guarded, "install", "filled", "symbolic"),
    "load": (compiler, "load_serialized", "filled", "both"),
    "kernel_installation": (kernels, "installed", "filled", "both"),
    "wait": (single_flight, "claim", "empty", "both"),
    "compile": (compiler, "compile_serializable", "empty", "both"),
    "persist": (TieredStore, "put", "empty", "both"),
    "counters": (counters, "_write", "filled", "both"),
}
# Faults the pipeline cannot count in the phase they hit: settings are read before the request exists (counted
# as phase `request`), and a failing counter write cannot count itself (logged instead).
COUNTED_AS = {"counters": None}
# Steps of the graph pipeline before the load: with the frame cache on, a frame hit serves the whole frame without
# Dynamo tracing it, so these steps are never reached on a filled cache. They are faulted with frames off; the other
# phases run with the frame cache as configured (a frame hit reaches lookup, load, kernel installation, counters).
GRAPH_PIPELINE_ONLY = {"capture", "check", "key", "guard_selection", "guard_installation"}


def static_program(backend: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    x = torch.randn(6, 8)
    y = torch.compile(model, backend=backend)(x)
    y.sum().backward()
    return {"y": y.detach(), **{f"grad.{n}": p.grad for n, p in model.named_parameters()}}


def symbolic_program(backend: str) -> dict[str, torch.Tensor]:
    def f(x, w):
        return (x @ w).relu().sum(dim=1) * x.shape[0]

    compiled = torch.compile(f, backend=backend, dynamic=True)
    torch.manual_seed(1)
    w = torch.randn(8, 3)
    return {f"y{n}": compiled(torch.randn(n, 8), w) for n in (5, 9)}


def run(which: str, backend: str) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, program in (("static", static_program), ("symbolic", symbolic_program)):
        if which in (name, "both"):
            torch._dynamo.reset()
            out.update({f"{name}.{k}": v for k, v in program(backend).items()})
    return out


def main() -> None:
    work = Path(sys.argv[1])
    phases = sys.argv[2:] or list(PHASES)
    logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(levelname)s %(message)s", stream=sys.stdout)
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    reference = run("both", "inductor")
    filled = work / "filled"
    aotcache.configure(cache_dir=str(filled))
    frames = settings.current().frames
    run("both", "aotcache")  # fills the cache: every later "filled" run hits unless a fault says otherwise
    for phase in phases:
        owner, attr, state, which = PHASES[phase]
        cache = filled if state == "filled" else work / f"empty-{phase}"
        shutil.rmtree(work / f"empty-{phase}", ignore_errors=True)
        aotcache.configure(cache_dir=str(cache), frames=frames and phase not in GRAPH_PIPELINE_ONLY)
        fired = [0]
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)

        def faulty(*args, _phase=phase, _fired=fired, **kwargs):
            _fired[0] += 1
            raise InjectedFault(f"injected fault in {_phase}")

        setattr(owner, attr, faulty)
        before = aotcache.stats()
        escaped, equal = None, False
        try:
            got = run(which, "aotcache")
            want = {k: v for k, v in reference.items() if which == "both" or k.startswith(which)}
            equal = got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
        except BaseException as e:  # noqa: BLE001 - anything reaching the user's call is the failure under test
            escaped = f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc(file=sys.stdout)
        finally:
            setattr(owner, attr, original)
        stats = delta(aotcache.stats(), before)
        row = {
            "phase": phase,
            "which": which,
            "escaped": escaped,
            "equal": equal,
            "fired": fired[0],
            "internal_errors": stats.get("internal_errors", {}),
            "stats": stats,
        }
        print("RESULT " + json.dumps(row), flush=True)
    os.environ.pop("AOTCACHE_DIR", None)


if __name__ == "__main__":
    main()
