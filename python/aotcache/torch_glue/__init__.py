"""aotcache's one contact with torch's private modules (`torch._*`): a module per torch subsystem, each lending
the private names aotcache uses (its `_LENT` table) and holding the probes of the features that rest on them.

    dynamo         frames, guards, sources, Dynamo's folding and profiles; the frame cache's probe
    aot_autograd   AOTAutograd, torch's own caches of a compile; the sandbox and checkpoint-policy probes
    inductor       config, code cache, kernels, ISAs, tables, compile and load; kernel bundles, ISA memo, light load
    compile_entry  torch.compile's wrapper classes; the default-backend routing probe
    features       the registry: `resolve(feature)` probes once per process, a torch that fails turns the feature
                   off with one WARNING (docs/design/torch-internals.md)
    patching       `Patches`: pass-throughs installed into torch all together or not at all
    lazy           how a module lends a name (imported on first use)

Nothing else in aotcache imports a private torch module or reads `torch._*`
(tests/python/torch_glue/test_torch_boundary.py).
"""

from aotcache.torch_glue import aot_autograd, compile_entry, dynamo, inductor  # noqa: F401  (register features)
from aotcache.torch_glue.features import FEATURES, TESTED, Mismatch, report, resolve, unavailable

__all__ = ["FEATURES", "TESTED", "Mismatch", "report", "resolve", "unavailable"]
