"""Real clients served warm (issue 41): PyTorch Lightning's Trainer fitting a compiled LightningModule, and a PEFT
LoRA adapter on a small Llama (training step and inference). Before, every Lightning frame bypassed
(`guards_unloadable`: Dynamo's guard pickler wrote torch.float32 as a placeholder once a module held it as
`_dtype`) and every PEFT frame bypassed (`guards`: PeftType guarded by identity); their warm starts traced again.

One cold process and one under uncached inductor side by side, then one warm process (clients_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SUPPORT

HERE = SUPPORT


def _spawn(backend: str, out: Path, cache: Path, inductor: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "AOTCACHE_DIR": str(cache),
        "TORCHINDUCTOR_CACHE_DIR": str(inductor),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
    }
    with open(out.with_suffix(".log"), "w") as log:  # the child has its own descriptor
        return subprocess.Popen(
            [sys.executable, str(HERE / "clients_worker.py"), backend, str(out)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _finish(proc: subprocess.Popen, out: Path) -> dict:
    proc.wait(timeout=900)
    text = out.with_suffix(".log").read_text()
    assert proc.returncode == 0, text[-4000:]
    stats = next((json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("STATS ")), None)
    return {"results": torch.load(out), "stats": stats, "log": text}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clients")
    cache = tmp / "cache"
    cold = _spawn("aotcache", tmp / "cold.pt", cache, tmp / "inductor-cold")
    ref = _spawn("inductor", tmp / "ref.pt", tmp / "unused", tmp / "inductor-ref")
    out = {"cold": _finish(cold, tmp / "cold.pt"), "ref": _finish(ref, tmp / "ref.pt")}
    out["warm"] = _finish(_spawn("aotcache", tmp / "warm.pt", cache, tmp / "inductor-warm"), tmp / "warm.pt")
    return out


def test_cold_records_every_frame(runs):
    frames = runs["cold"]["stats"]["frames"]
    assert frames.get("recorded", 0) >= 2 and not frames.get("bypasses"), frames
    assert not frames.get("internal_errors") and not runs["cold"]["stats"]["internal_errors"]


def test_warm_serves_every_frame_and_hits_every_graph(runs):
    stats = runs["warm"]["stats"]
    frames = stats["frames"]
    assert frames.get("hits", 0) >= 2 and not frames.get("misses") and not frames.get("bypasses"), frames
    assert stats["misses"] == 0 and stats["hits"] >= 2 and stats["errors"] == 0, stats
    assert " frame hit Regressor.forward" in runs["warm"]["log"]  # Lightning's module
    assert " frame hit PeftModel.forward" in runs["warm"]["log"]  # PEFT's wrapper (PeftType guarded by content)


@pytest.mark.parametrize("client", ["lightning", "peft_lora"])
def test_results_bitwise_equal_to_inductor(runs, client):
    ref = runs["ref"]["results"][client]
    for name in ("cold", "warm"):
        got = runs[name]["results"][client]
        assert got.keys() == ref.keys()
        for k in ref:
            assert torch.equal(got[k], ref[k]), f"{name} {client} {k}"
