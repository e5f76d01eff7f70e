"""`python -m aotcache.demo`: compile a GPT-style model twice, in two fresh processes sharing one cache.

The first (cold) process compiles and stores; the second (warm) loads. Prints time to first result, the hits and
misses of each, and the largest difference between the two runs' outputs and gradients.
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


def _worker(out_path: str) -> None:
    t_start = time.perf_counter()
    import torch
    import torch.nn.functional as F

    import aotcache
    from aotcache.demo_model import make_model_and_batch

    t_imported = time.perf_counter()
    # Inductor's CPU embedding backward accumulates with atomics in thread order: without deterministic algorithms
    # two runs of the same compiled code differ in the last bits, hiding whether the cache changed anything.
    torch.use_deterministic_algorithms(True)
    model, idx, targets = make_model_and_batch()
    compiled = torch.compile(model, backend="aotcache")

    logits = compiled(idx)  # training step: forward, loss, backward
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    t_train = time.perf_counter()

    model.eval()
    with torch.no_grad():  # inference: a second graph
        inference_logits = compiled(idx)
    t_infer = time.perf_counter()

    grads = {name: p.grad for name, p in model.named_parameters()}
    torch.save({"logits": logits.detach(), "inference": inference_logits, "grads": grads}, out_path)
    result = {
        "import_s": t_imported - t_start,
        "train_step_s": t_train - t_imported,
        "inference_s": t_infer - t_train,
        "first_result_s": t_infer - t_imported,
        "stats": aotcache.stats(),
    }
    print("AOTCACHE_DEMO_RESULT " + json.dumps(result))


def _run_worker(out_path: str, env: dict[str, str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "aotcache.demo", "--worker", out_path], env=env, capture_output=True, text=True
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
    parser.add_argument("--cache-dir", help="cache directory to use (default: a fresh temporary one)")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker)
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
    print(f"aotcache demo: GPT-style model (2 layers, dim 128), training step + inference, cache {cache_dir}")
    try:
        print("  cold process: compiling ...", flush=True)
        cold = _run_worker(os.path.join(work, "cold.pt"), env)
        print("  warm process: loading ...", flush=True)
        warm = _run_worker(os.path.join(work, "warm.pt"), env)
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
    ratio = cold["first_result_s"] / warm["first_result_s"]
    print()
    print(f"cold / warm time to first results: {ratio:.1f}x")
    print(f"max |difference| cold vs warm: outputs {diff_out:.3g}, gradients {diff_grad:.3g}")
    ok = warm["stats"]["hits"] >= 2 and warm["stats"]["misses"] == 0 and diff_out == 0.0 and diff_grad == 0.0
    print("result: " + ("OK (warm run hit every graph, results bitwise equal)" if ok else "UNEXPECTED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
