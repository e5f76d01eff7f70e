"""A torch whose Dynamo internals have another shape than the ones the frame cache hooks: the hooks are installed
all or none, the frame cache turns itself off with one WARNING naming what is missing, and the user's
`torch.compile(..., backend="aotcache")` runs, its graphs still cached. Each internal is removed in a fresh process
before aotcache is imported (as a torch that renamed it would be)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import json, sys, torch
    import torch._dynamo.convert_frame, torch._dynamo.guards, torch._dynamo.output_graph
    import torch._dynamo.variables.functions
    owner, name = sys.argv[1].rsplit(".", 1)
    target = eval(owner)  # the module or class that holds the internal
    if name == "_compile":  # a signature without the arguments the hook reads
        original = target._compile
        target._compile = lambda code, frame_globals, *a, **k: original(code, frame_globals, *a, **k)
    elif name == "CheckFunctionManager":  # no longer a class (torch itself calls it by this name)
        cfm = target.CheckFunctionManager
        target.CheckFunctionManager = lambda *a, **k: cfm(*a, **k)
    else:
        delattr(target, name)

    def fn(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(8)
    out = torch.compile(fn, backend="aotcache")(x)
    import aotcache
    from aotcache.frames import hooks
    assert torch.equal(out, torch.compile(fn, backend="inductor")(x))
    print("RESULT " + json.dumps({"unavailable": hooks.unavailable, "stats": aotcache.stats()}))
    """
)

INTERNALS = [
    "torch._dynamo.convert_frame._compile",
    "torch._dynamo.convert_frame.CheckFunctionManager",
    "torch._dynamo.guards.CheckFunctionManager.serialize_guards",
    "torch._dynamo.guards.GuardsStatePickler.reducer_override",
    "torch._dynamo.variables.functions.invoke_and_store_as_constant",
]


@pytest.mark.parametrize("internal", INTERNALS)
def test_a_missing_internal_turns_the_frame_cache_off_and_nothing_else(internal, tmp_path):
    env = dict(os.environ, AOTCACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env.pop("AOTCACHE_FRAMES", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, internal], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    assert result["unavailable"], result
    assert result["stats"].get("misses") == 1 and not result["stats"].get("frames"), result["stats"]
    warnings = [ln for ln in proc.stderr.splitlines() if "the frame cache is off" in ln]
    assert len(warnings) == 1 and internal.rsplit(".", 1)[1] in warnings[0], proc.stderr[-3000:]
