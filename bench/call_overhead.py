"""Per-call cost of a compiled model after its first call: a frame aotcache served against the same frame traced.

    .venv/bin/python bench/call_overhead.py [--models blocks:25,blocks:100,blocks:400,gpt2,llama,gpt2_decode]
                                            [--reps 3] [--calls 2000] [--out-dir bench/results]

A warm start is not the only place a served frame can cost: its guards run on every call. Dynamo's own guards of a
traced frame check identities (in one process); a served frame checks what aotcache adds for soundness across
processes on its first call only (every module's hook dicts empty, the storage partition of every input) and, per
call, the storage partition of the tensors the call passes and content guards in place of identity guards. This
measures what a call costs, side by side in fresh processes: eager (no compile), backend="inductor" (a traced
frame), aotcache's cold process (a traced frame, recorded) and its warm process (the frame served from the entry).

Models: `blocks:N`, N blocks of Linear(4, 4) + ReLU in a Sequential on 2x4 inputs (per call almost nothing but
overhead; 2 parameters and 3 modules per block); `gpt2` and `llama`, Hugging Face causal LMs of 2 layers, dim 64
(random weights), an inference forward of 16 tokens (compute small enough to show the overhead as a GPU would);
`gpt2_decode`, `generate()` of 16 new tokens greedily with the model's forward compiled, per token. Per process:
warm-up calls, then `--calls` calls (`--calls`/50 generations for decode) timed in 5 batches, the median batch's
per-call time. Medians over `--reps` processes per system, systems alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("eager", "inductor", "aotcache_cold", "aotcache_warm")


def _model(name: str) -> tuple:
    """(module to compile, example input, call(fn, x) -> output, calls per batch divisor) for a model name."""
    import torch

    torch.manual_seed(0)
    if name.startswith("blocks:"):
        n = int(name.split(":")[1])
        model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(n)])
        return model, torch.randn(2, 4), lambda fn, x: fn(x), 1
    import transformers

    if name in ("gpt2", "gpt2_decode"):
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64)
        model = transformers.GPT2LMHeadModel(config).eval()
    elif name == "llama":
        config = transformers.LlamaConfig(
            vocab_size=128,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
        model = transformers.LlamaForCausalLM(config).eval()
    else:
        raise SystemExit(f"unknown model {name}")
    ids = torch.randint(0, 128, (1, 16), generator=torch.Generator().manual_seed(1))
    if name == "gpt2_decode":
        model.generation_config.pad_token_id = 0

        def decode(fn, x):
            return model.generate(x, max_new_tokens=16, do_sample=False, min_new_tokens=16)

        return model, ids, decode, 50
    return model, ids, lambda fn, x: fn(input_ids=x).logits, 1


def _worker(system: str, name: str, calls: int) -> None:
    import torch

    model, x, call, divisor = _model(name)
    if system == "eager":
        fn = model
    else:
        if system.startswith("aotcache"):
            import aotcache  # noqa: F401  (registers the backend)
        backend = "aotcache" if system.startswith("aotcache") else "inductor"
        if name == "gpt2_decode":  # generate() calls the compiled forward once per token
            model.forward = torch.compile(model.forward, backend=backend)
            fn = model
        else:
            fn = torch.compile(model, backend=backend)
    batches = []
    per_batch = max(1, calls // 5 // divisor)
    with torch.no_grad():
        out = call(fn, x)
        for _ in range(max(2, 200 // divisor)):
            call(fn, x)
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(per_batch):
                call(fn, x)
            batches.append((time.perf_counter() - t) / per_batch / (16 if name == "gpt2_decode" else 1))
    row = {"system": system, "model": name, "per_call_us": 1e6 * statistics.median(batches)}
    if system.startswith("aotcache"):
        import aotcache

        frames = aotcache.stats().get("frames", {})
        row["frames_served"] = frames.get("hits", 0)
    row["checksum"] = float(out.double().sum())
    print("ROW " + json.dumps(row), flush=True)


def run(system: str, name: str, calls: int, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOTCACHE_", "TORCHINDUCTOR_"))}
    env.update(AOTCACHE_DIR=str(cache / "aotcache"), TORCHINDUCTOR_CACHE_DIR=str(cache / f"{system}-inductor"))
    if system.startswith("aotcache"):
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "aotcache-inductor")
    done = subprocess.run(
        [sys.executable, __file__, "--worker", system, name, str(calls)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    rows = [json.loads(ln[4:]) for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
    if done.returncode != 0 or len(rows) != 1:
        raise RuntimeError(f"{system} {name}: exit {done.returncode}: {done.stderr[-2000:]}")
    return rows[0]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="blocks:25,blocks:100,blocks:400,gpt2,llama,gpt2_decode")
    parser.add_argument("--blocks", default="", help="shorthand: --blocks 25,100 adds blocks:25,blocks:100")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    started = time.time()
    load = os.getloadavg()[0]
    table = []
    models = [m for m in args.models.split(",") if m] if not args.blocks else []
    models += [f"blocks:{b}" for b in args.blocks.split(",") if b]
    for name in models:
        with tempfile.TemporaryDirectory(prefix="aotcache-call-overhead-") as tmp:
            runs: dict[str, list[dict]] = {s: [] for s in SYSTEMS}
            runs["aotcache_cold"].append(run("aotcache_cold", name, args.calls, Path(tmp)))  # fills the cache
            for rep in range(args.reps):
                order = ["eager", "inductor", "aotcache_warm"]
                for system in order if rep % 2 == 0 else order[::-1]:
                    runs[system].append(run(system, name, args.calls, Path(tmp)))
            if any(r.get("frames_served", 0) < 1 for r in runs["aotcache_warm"]):
                raise RuntimeError(f"{name}: a warm aotcache process did not serve its frame: {runs['aotcache_warm']}")
            sums = {r["checksum"] for s, rs in runs.items() if s != "eager" for r in rs}  # compiled: bitwise
            eager = {r["checksum"] for r in runs["eager"]}
            if len(sums) != 1 or any(abs(e - next(iter(sums))) > 1e-4 * max(1.0, abs(e)) for e in eager):
                raise RuntimeError(f"{name}: results differ across systems: compiled {sums}, eager {eager}")
            med = {s: statistics.median(r["per_call_us"] for r in rs) for s, rs in runs.items()}
            table.append({"model": name, "per_call_us": med, "runs": runs})
            print(f"{name}: " + ", ".join(f"{s} {v:.0f} us" for s, v in med.items()), flush=True)
    meta = (
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(started))}, {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}, torch {_torch_version()}; load {load:.1f} at "
        f"start, {os.getloadavg()[0]:.1f} at end. Command: `bench/call_overhead.py --models {','.join(models)} "
        f"--reps {args.reps} --calls {args.calls}`"
    )
    lines = [
        meta,
        "",
        "Per-call time after the first call (us, median batch, median of processes; gpt2_decode: per generated "
        "token); aotcache cold = the frame traced in that process, warm = served from the entry. Results bitwise "
        "equal across the compiled systems, eager's within 1e-4.",
        "",
        "| model | eager | inductor (traced) | aotcache cold (traced) | aotcache warm (served) | "
        "served - traced inductor | served / traced inductor |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table:
        m = row["per_call_us"]
        lines.append(
            f"| {row['model']} | {m['eager']:.0f} | {m['inductor']:.0f} | {m['aotcache_cold']:.0f} | "
            f"{m['aotcache_warm']:.0f} | {m['aotcache_warm'] - m['inductor']:+.0f} | "
            f"{m['aotcache_warm'] / m['inductor']:.3f} |"
        )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "call_overhead.md").write_text("\n".join(lines) + "\n")
    (out / "call_overhead.json").write_text(json.dumps({"meta": meta, "table": table}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


def _torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


if __name__ == "__main__":
    sys.exit(main())
