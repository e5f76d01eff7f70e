"""A torch whose internals have another shape than the ones aotcache uses (python/aotcache/torch_glue/).

The frame cache: its hooks are installed all or none, the frame cache turns itself off with one WARNING naming what
is missing, and the user's `torch.compile(..., backend="aotcache")` runs, its graphs still cached. The other features
likewise: each turned off alone with one WARNING, the user's result that of backend="inductor". Each internal is
removed or changed in a fresh process before aotcache is imported (as a torch that renamed it would be)."""

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
def test_a_missing_internal_turns_the_frame_cache_off_and_nothing_else(internal, tmp_path, inductor_dir):
    env = dict(os.environ, AOTCACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(inductor_dir))
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


def test_every_feature_passes_its_check_on_this_torch():
    """The installed torch (2.13.0 here, 2.14.1 in CI's second step, any with `make test-torch`) passes every
    feature's probe: no feature is off without anyone seeing it."""
    from aotcache import torch_glue

    assert torch_glue.report() == dict.fromkeys(torch_glue.FEATURES)


# The other features (torch_glue.FEATURES), each with its internal removed or changed before aotcache is imported,
# and what the compile shows with the feature off. Each case's program: `setup` (run first), then the compile.
FEATURE_CASES = {
    "torch_cache_sandbox:renamed": (  # torch's own uses follow the new name, as in a torch that renamed it
        "import os\n"
        "from torch._inductor.codecache import FxGraphCache\n"
        "FxGraphCache._get_cache_root = FxGraphCache._get_tmp_dir\n"
        "del FxGraphCache._get_tmp_dir\n"
        "FxGraphCache._get_tmp_dir_for_key = classmethod(\n"
        "    lambda cls, key: os.path.join(FxGraphCache._get_cache_root(), key[1:3], key))",
        "the graph cache",
    ),
    "torch_cache_sandbox:ignored": (  # the helper is there, but torch no longer writes where it says
        "from torch._inductor.codecache import FxGraphCache\n"
        "FxGraphCache._get_tmp_dir_for_key = classmethod(lambda cls, key: '/tmp/elsewhere/' + key)",
        "the graph cache",
    ),
    "checkpoint_policy_pin:changed": (  # no longer reads a policy's cache_hash
        "from torch._functorch._aot_autograd import autograd_cache\n"
        "autograd_cache._get_context_fn_cache_hash = lambda context_fn: None",
        "caching graphs with selective-checkpoint policies",
    ),
    "kernel_bundles:changed": (  # its parameters renamed (torch calls it positionally)
        "from torch._inductor import codecache\n"
        "_header = codecache._precompile_header\n"
        "def _precompile_header(header, command_line, **compile_command):\n"
        "    return _header(header, command_line, **compile_command)\n"
        "codecache._precompile_header = _precompile_header",
        "kernel bundles",
    ),
    "isa_probe_memo:changed": (  # the probe list no longer a functools cache
        "from torch._inductor import cpu_vec_isa\n"
        "_original = cpu_vec_isa.valid_vec_isa_list\n"
        "cpu_vec_isa.valid_vec_isa_list = lambda: _original()",
        "the vector-ISA probe memo",
    ),
    "light_load:changed": (  # a __call__ that reads other names than the one checked
        "from torch._inductor import output_code\n"
        "_call = output_code.CompiledFxGraph.__call__\n"
        "def __call__(self, inputs):\n"
        "    return _call(self, inputs)\n"
        "output_code.CompiledFxGraph.__call__ = __call__",
        "light loading",
    ),
}

FEATURE_PROGRAM = textwrap.dedent(
    """
    import json, sys, torch
    exec(sys.argv[1])

    def fn(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(8)
    out = torch.compile(fn, backend="aotcache")(x)
    import aotcache
    from aotcache import torch_glue
    from torch._inductor import codecache
    assert torch.equal(out, torch.compile(fn, backend="inductor")(x))
    off = {name: reason for name, reason in torch_glue.report().items() if reason}
    hooked = "_aotcache_replaces" in vars(codecache.CppCodeCache.__dict__["load_async"].__func__)
    print("RESULT " + json.dumps({"off": off, "stats": aotcache.stats(), "kernel_hooks": hooked}))
    """
)


@pytest.mark.parametrize("case", sorted(FEATURE_CASES))
def test_a_changed_internal_turns_its_feature_off_with_one_warning(case, tmp_path, inductor_dir):
    feature = case.split(":")[0]
    setup, title = FEATURE_CASES[case]
    # The session's kernel directory (conftest): each case's program builds the same kernel, once for all of them.
    env = dict(os.environ, AOTCACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(inductor_dir))
    proc = subprocess.run(
        [sys.executable, "-c", FEATURE_PROGRAM, setup], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    assert list(result["off"]) == [feature], result
    stats = result["stats"]
    assert stats["torch_internals_off"] == [feature], stats
    warnings = [ln for ln in proc.stderr.splitlines() if f"{title} is off" in ln]
    assert len(warnings) == 1, proc.stderr[-3000:]
    if feature == "torch_cache_sandbox":  # compiled as backend="inductor", the reason counted
        assert stats["bypass_reasons"] == {"torch_internals": 1} and not stats["misses"], stats
    else:  # the graph is cached as always
        assert stats.get("misses") == 1 and not stats.get("bypasses"), stats
    if feature == "kernel_bundles":  # none of its three hooks installed
        assert not result["kernel_hooks"] and stats["kernels"].get("not_captured") == 1, stats
    else:
        assert result["kernel_hooks"], result
