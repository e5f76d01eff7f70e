"""Hugging Face models (zoo_models.py: GPT-2 and Llama; BERT with HF_FLOAT_MODELS) trained under `dynamic=True`
with a compiled AdamW step and a cosine LR schedule: every float becomes symbolic (LayerNorm / RMSNorm eps, attention
scaling, the learning rate), so the graphs take every path of tensorify.py (kept symbolic, restarted).
test_tensorify.py runs it.

usage: hf_float_worker.py inductor|aotcache OUT.pt   (inductor: the reference, torch's caches off)
Writes the losses and parameters; prints `STATS {json}` (aotcache's counters) under aotcache.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import zoo_models  # noqa: E402

# GPT-2 (LayerNorm eps, attention scaling) and Llama (RMSNorm eps) take every path of tensorify.py; BERT (LayerNorm
# eps again, an encoder) adds a third model's compile and no path: HF_FLOAT_MODELS=gpt2,llama,bert runs it too.
MODELS = tuple(os.environ.get("HF_FLOAT_MODELS", "gpt2,llama").split(","))


def main() -> int:
    backend, out = sys.argv[1], sys.argv[2]
    if backend == "inductor":
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    result: dict[str, torch.Tensor] = {}
    with zoo_models.deterministic():
        for name in MODELS:
            spec = zoo_models.MODELS[name]
            torch._dynamo.reset()
            model = spec.build().train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
            forward = torch.compile(model, backend=backend, dynamic=True)
            step = torch.compile(opt.step, backend=backend)
            batch = spec.train_batch()
            for i in range(3):
                torch.manual_seed(i)  # dropout
                loss = forward(**batch).loss
                loss.backward()
                step()
                sched.step()
                opt.zero_grad()
                result[f"{name}.loss{i}"] = loss.detach().clone()
            result.update({f"{name}.{k}": v.detach().clone() for k, v in model.named_parameters()})
    if backend == "aotcache":
        import aotcache

        print("STATS " + json.dumps(aotcache.stats()))
    torch.save(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
