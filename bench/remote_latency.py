"""Lookup latency of a remote hit (Redis on this machine, then the verified backfill) against a local hit.

    .venv/bin/python bench/remote_latency.py [--reps 50] [--out bench/results/remote_latency.json]

Real entries: the demo GPT (python/aotcache/demo_model.py, 2 graphs: training step and inference) and a small MLP are
compiled once with backend "aotcache" into a temporary directory. Then, per entry, medians over `--reps` of:
- local_get: LocalStore.get (read the file, SHA-256, inflate, decode): the lookup part of a local hit;
- remote_get: RemoteStore.get from a redis-server started here on 127.0.0.1 (loopback, no network latency);
- remote_hit: remote_get + LocalStore.put_encoded (verify, atomic write) + LocalStore.get: the lookup part of a
  remote hit as the backend does it;
and the throughput of each for one process issuing them back to back (`*_per_s`, `*_mb_per_s` of entry bytes).
Each both unsigned and with AOTCACHE_SIGNING_KEY set (HMAC-SHA256 verified on put_encoded and on get). Loading the
artifact into torch comes after either and is the same for both, so it is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed")

    work = Path(tempfile.mkdtemp(prefix="aotcache_remote_bench."))
    port = _free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        cwd=work,
    )
    try:
        results = _run(work, f"redis://127.0.0.1:{port}/0", args.reps)
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(work, ignore_errors=True)
    report = {"machine": platform.platform(), "cpus": os.cpu_count(), "reps": args.reps, "entries": results}
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


def _measure(local, backfill, remote, key: str, reps: int) -> dict:
    def remote_hit() -> None:
        backfill.put_encoded(remote.get(key))
        assert backfill.get(key) is not None
        backfill.remove(key)

    entry_mb = len(remote.get(key)) / 1e6
    r = {
        "payload_bytes": len(local.get(key).payload),
        "local_get_ms": round(_median_ms(lambda: local.get(key), reps), 3),
        "remote_get_ms": round(_median_ms(lambda: remote.get(key), reps), 3),
        "remote_hit_ms": round(_median_ms(remote_hit, reps), 3),
    }
    # Throughput of one process issuing lookups back to back (one connection per server, as the backend uses it):
    # lookups per second and entry megabytes per second, from the medians.
    for name in ("local_get", "remote_get", "remote_hit"):
        per_s = 1e3 / max(r[f"{name}_ms"], 1e-6)
        r[f"{name}_per_s"] = round(per_s)
        r[f"{name}_mb_per_s"] = round(per_s * entry_mb, 1)
    return r


def _run(work: Path, url: str, reps: int) -> list[dict]:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor")
    import torch
    import torch.nn.functional as F

    import aotcache
    from aotcache import _core, settings
    from aotcache.demo_model import make_model_and_batch

    out = []
    for signed in (False, True):
        src = work / ("signed" if signed else "plain")
        if signed:
            os.environ["AOTCACHE_SIGNING_KEY"] = "bench:" + "k" * 32
        aotcache.configure(cache_dir=str(src))
        torch._dynamo.reset()
        model, idx, targets = make_model_and_batch()
        compiled = torch.compile(model, backend="aotcache")
        F.cross_entropy(compiled(idx).flatten(0, 1), targets.flatten()).backward()
        model.eval()
        with torch.no_grad():
            compiled(idx)
        mlp = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU()), backend="aotcache")
        mlp(torch.randn(8, 16))

        options = settings.store_options(settings.current())  # signs and verifies with AOTCACHE_SIGNING_KEY
        local = _core.LocalStore.open(str(src), **options)
        backfill = _core.LocalStore.open(str(work / ("backfill_signed" if signed else "backfill_plain")), **options)
        remote = _core.RemoteStore.open(url)
        for key, size, _ in sorted(local.list(), key=lambda row: row[1]):
            remote.put(key, local.read_entry_file(key))
            out.append({"signed": signed, "entry_bytes": size, **_measure(local, backfill, remote, key, reps)})
    return out


if __name__ == "__main__":
    main()
