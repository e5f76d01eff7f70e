"""`python -m aotcache.demo`: compile a real model twice, in two fresh processes sharing one cache.

The model is Hugging Face's GPT-2 (`transformers`; 2 layers, random weights, nothing downloaded), or aotcache's own
GPT-style model when `transformers` is not installed. The first (cold) process compiles and stores; the second
(warm) loads. Prints time to first result, the hits and misses of each, the frames served without Dynamo tracing
them, and the largest difference between the two runs' outputs and gradients.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HF_GPT2 = dict(n_layer=2, n_embd=128, n_head=4, n_positions=128, vocab_size=2048)
BATCH, CONTEXT = 4, 64


def _hf_gpt2():
    """GPT-2 from a small config with random weights (dropout off, so two runs compute the same)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(**HF_GPT2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    idx = torch.randint(0, cfg.vocab_size, (BATCH, CONTEXT))

    def train(compiled):
        out = compiled(input_ids=idx, labels=idx)
        out.loss.backward()
        return out.logits

    def infer(compiled):
        return compiled(input_ids=idx).logits

    return model, train, infer


def _own_gpt():
    import torch.nn.functional as F

    from aotcache.demo_model import make_model_and_batch

    model, idx, targets = make_model_and_batch()

    def train(compiled):
        logits = compiled(idx)
        F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
        return logits

    return model, train, lambda compiled: compiled(idx)


def _worker(out_path: str, model_name: str) -> None:
    t_start = time.perf_counter()
    import torch

    import aotcache

    # Inductor's CPU embedding backward accumulates with atomics in thread order: without deterministic algorithms
    # two runs of the same compiled code differ in the last bits, hiding whether the cache changed anything.
    torch.use_deterministic_algorithms(True)
    model, train, infer = _hf_gpt2() if model_name == "gpt2" else _own_gpt()
    t_imported = time.perf_counter()
    compiled = torch.compile(model, backend="aotcache")

    logits = train(compiled)  # training step: forward, loss, backward
    t_train = time.perf_counter()

    model.eval()
    with torch.no_grad():  # inference: a second graph
        inference_logits = infer(compiled)
    t_infer = time.perf_counter()

    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    torch.save({"logits": logits.detach(), "inference": inference_logits, "grads": grads}, out_path)
    result = {
        "import_s": t_imported - t_start,
        "train_step_s": t_train - t_imported,
        "inference_s": t_infer - t_train,
        "first_result_s": t_infer - t_imported,
        "stats": aotcache.stats(),
    }
    print("AOTCACHE_DEMO_RESULT " + json.dumps(result))


def _model_name() -> str:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "own"
    return "gpt2"


def _run_worker(out_path: str, model_name: str, env: dict[str, str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "aotcache.demo", "--worker", out_path, "--model", model_name],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"demo worker failed with exit code {proc.returncode}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("AOTCACHE_DEMO_RESULT "))
    result = json.loads(line.split(" ", 1)[1])
    result["process_wall_s"] = wall
    return result


def _max_abs_diff(a, b) -> float:

    if isinstance(a, dict):
        return max(_max_abs_diff(a[k], b[k]) for k in a)
    return float((a - b).abs().max()) if a.numel() else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument(
        "--model", choices=("gpt2", "own"), help="gpt2 (Hugging Face, the default when installed) or own"
    )
    parser.add_argument("--cache-dir", help="cache directory to use (default: a fresh temporary one)")
    args = parser.parse_args(argv)
    model_name = args.model or _model_name()
    if args.worker:
        _worker(args.worker, model_name)
        return 0

    import torch

    work = tempfile.mkdtemp(prefix="aotcache-demo-")
    cache_dir = args.cache_dir or os.path.join(work, "cache")
    if os.path.isdir(cache_dir):
        shutil.rmtree(cache_dir)
    env = dict(os.environ)
    env["AOTCACHE_DIR"] = cache_dir
    # A fresh Inductor kernel directory too, so the cold run really compiles everything.
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor")
    env["HF_HUB_OFFLINE"] = "1"  # the model is built from a config: nothing to download
    described = {
        "gpt2": "Hugging Face GPT-2 (transformers, 2 layers, dim 128, random weights)",
        "own": "aotcache's GPT-style model (2 layers, dim 128; transformers is not installed)",
    }[model_name]
    print(f"aotcache demo: {described}, training step + inference, cache {cache_dir}")
    try:
        print("  cold process: compiling ...", flush=True)
        cold = _run_worker(os.path.join(work, "cold.pt"), model_name, env)
        print("  warm process: loading ...", flush=True)
        warm = _run_worker(os.path.join(work, "warm.pt"), model_name, env)
        a = torch.load(os.path.join(work, "cold.pt"))
        b = torch.load(os.path.join(work, "warm.pt"))
        diff_out = max(_max_abs_diff(a["logits"], b["logits"]), _max_abs_diff(a["inference"], b["inference"]))
        diff_grad = _max_abs_diff(a["grads"], b["grads"])
    finally:
        if not args.cache_dir:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'':28}{'cold':>10}{'warm':>10}")
    rows = (
        ("train step (first result)", cold["train_step_s"], warm["train_step_s"]),
        ("inference (first result)", cold["inference_s"], warm["inference_s"]),
        ("time to first results", cold["first_result_s"], warm["first_result_s"]),
        ("  of which compiling", cold["stats"]["compile_seconds"], warm["stats"]["compile_seconds"]),
        ("  of which loading entries", cold["stats"]["load_seconds"], warm["stats"]["load_seconds"]),
        ("whole process", cold["process_wall_s"], warm["process_wall_s"]),
    )
    for label, a, b in rows:
        print(f"{label:28}{a:>9.2f}s{b:>9.2f}s")
    for label in ("hits", "misses", "bypasses", "errors"):
        print(f"{label:28}{cold['stats'][label]:>10}{warm['stats'][label]:>10}")
    # Frames Dynamo did not trace: served whole from the frame cache (AOTCACHE_FRAMES=0 turns it off).
    frames = [r["stats"].get("frames", {}).get("hits", 0) for r in (cold, warm)]
    print(f"{'frames served, no tracing':28}{frames[0]:>10}{frames[1]:>10}")
    ratio = cold["first_result_s"] / warm["first_result_s"]
    print()
    print(f"cold / warm time to first results: {ratio:.1f}x")
    print(f"max |difference| cold vs warm: outputs {diff_out:.3g}, gradients {diff_grad:.3g}")
    ok = warm["stats"]["hits"] >= 2 and warm["stats"]["misses"] == 0 and diff_out == 0.0 and diff_grad == 0.0
    print("result: " + ("OK (warm run hit every graph, results bitwise equal)" if ok else "UNEXPECTED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
