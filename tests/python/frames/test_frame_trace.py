"""A served frame and torch's structured trace (frames/serve.py `_trace_served`): without TORCH_TRACE, serving a
frame never builds Dynamo's text of the guard tree (torch's lazy trace handler is resolved by a cheap event first);
with TORCH_TRACE, the trace names each served frame and still holds Dynamo's guard text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import json, sys
    import torch
    import torch._dynamo.guards as dynamo_guards

    built = []
    original = dynamo_guards.GuardManagerWrapper.__str__
    def counted(self):
        built.append(1)
        return original(self)
    dynamo_guards.GuardManagerWrapper.__str__ = counted

    import aotcache

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        def forward(self, x):
            return self.b(torch.relu(self.a(x))).sum()

    torch.manual_seed(0)
    out = torch.compile(Block(), backend="aotcache")(torch.randn(4, 8))
    frames = aotcache.stats()["frames"]
    print("RESULT " + json.dumps({"served": frames.get("hits", 0), "guard_text_built": len(built),
                                   "out": out.item()}))
    """
)


def _run(tmp_path, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    full.update(AOTCACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), **env)
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=full, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_a_served_frame_builds_no_guard_text_unless_a_trace_is_written(tmp_path):
    cold = _run(tmp_path)
    assert cold["served"] == 0
    warm = _run(tmp_path)
    assert warm["served"] == 1 and warm["out"] == cold["out"]
    assert warm["guard_text_built"] == 0  # before: the served frame's was the process's first trace event
    traces = tmp_path / "trace"
    traced = _run(tmp_path, TORCH_TRACE=str(traces))
    assert traced["served"] == 1 and traced["out"] == cold["out"]
    assert traced["guard_text_built"] >= 1  # a trace is written: Dynamo's guard text is in it, as without aotcache
    text = "".join(p.read_text() for p in traces.iterdir())
    assert "aotcache_frame_served" in text and "dynamo_cpp_guards_str" in text
