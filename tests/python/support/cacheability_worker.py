"""One fresh process running cacheability cases through aotcache (AOTCACHE_DIR set by the caller).

usage: cacheability_worker.py VARIANT OUT_DIR [--torch-verdict] [--torch-cache] [CASE...]

--torch-cache compiles with backend="inductor" and torch's own caches instead (TORCHINDUCTOR_CACHE_DIR and the
cache switches set by the caller) and reports torch's AOTAutograd cache hits.

Writes OUT_DIR/<case>.<variant>.pt (outputs) and <case>.<variant>.eager.pt (the uncompiled reference), and prints
one JSON line per case:
{"case", "hits", "misses", "bypasses", "bypass_reasons", "error" (a failure), "torch_verdict" (optional)}.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import torch
from cacheability_cases import BY_NAME, CASES, Case, run_case, run_eager
from torch._dynamo.utils import counters

import aotcache


def torch_verdict(case: Case, built: tuple) -> str:
    """Torch 2.13's own AOTAutograd cacheability verdict on the same Dynamo graph (no compile)."""
    from torch._functorch._aot_autograd import autograd_cache

    verdicts: list[str] = []

    def judge(gm: torch.fx.GraphModule) -> str:
        try:
            with torch._inductor.config.patch(fx_graph_cache=True, freezing=case.name == "freezing"):
                autograd_cache.check_cacheable(gm)
                autograd_cache._collect_context_fn_hashes(gm)
            for module in gm.modules():
                if isinstance(module, torch.fx.GraphModule):
                    for node in module.graph.nodes:
                        if isinstance(node.target, torch._ops.HigherOrderOperator) and not node.target.cacheable():
                            return f"bypass: HigherOrderOperator {node.target.name()} is not cacheable"
            return "cacheable"
        except autograd_cache.BypassAOTAutogradCache as e:
            return "bypass: " + " ".join(str(e).split())[:110]

    def backend(gm, example_inputs):
        verdicts.append(judge(gm))
        return gm.forward

    fn, args, _ = built
    torch._dynamo.reset()
    if case.direct:
        verdicts.append(judge(fn))
    else:
        torch.compile(fn, backend=backend, fullgraph=True)(*args)
    torch._dynamo.reset()
    return "; ".join(verdicts)


def main() -> None:
    variant, out_dir = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    with_torch = "--torch-verdict" in rest
    backend = "inductor" if "--torch-cache" in rest else "aotcache"
    names = [a for a in rest if not a.startswith("--")] or [c.name for c in CASES]
    for name in names:
        case = BY_NAME[name]
        row: dict = {"case": name}
        try:
            built = case.build(variant)
            if with_torch:
                row["torch_verdict"] = torch_verdict(case, built)
            torch._dynamo.reset()
            aotcache.reset_stats()
            counters.clear()
            outputs = run_case(case, built, backend)
            torch.save(outputs, os.path.join(out_dir, f"{name}.{variant}.pt"))
            torch.save(run_eager(built), os.path.join(out_dir, f"{name}.{variant}.eager.pt"))
            s = aotcache.stats()
            row.update(hits=s["hits"], misses=s["misses"], bypasses=s["bypasses"], bypass_reasons=s["bypass_reasons"])
            row["torch_cache_hits"] = counters["aot_autograd"]["autograd_cache_hit"]
        except Exception:
            row["error"] = traceback.format_exc()[-2000:]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
