"""torch.compile's entry: the wrapper classes it builds around a backend (default_backend.py routes the default
backend through aotcache; frames/hooks.py recognises a compiled callable). Lent from `_LENT`.
"""

from __future__ import annotations

from typing import Any

import torch

from aotcache.torch_glue.features import Mismatch, feature, signature_takes
from aotcache.torch_glue.lazy import lender

_LENT = {
    "TorchCompileInductorWrapper": "torch:_TorchCompileInductorWrapper",
    "TorchCompileWrapper": "torch:_TorchCompileWrapper",
}
__getattr__ = lender(globals(), _LENT)


# ---- torch.compile's default backend routed through aotcache (default_backend.py) ---------------------------------
@feature(
    "default_backend_routing",
    "aotcache.enable()",
    "torch.compile's default backend stays inductor (use backend='aotcache' explicitly)",
    ("torch._TorchCompileInductorWrapper.__init__", "torch._TorchCompileInductorWrapper.__call__"),
)
def _default_backend_routing() -> dict[str, Any]:
    cls = getattr(torch, "_TorchCompileInductorWrapper", None)
    if not isinstance(cls, type):
        raise Mismatch("torch._TorchCompileInductorWrapper is not a class")
    init, call = cls.__dict__.get("__init__"), cls.__dict__.get("__call__")
    if not callable(init) or not callable(call):
        raise Mismatch("torch._TorchCompileInductorWrapper defines no __init__ and __call__ of its own")
    signature_takes(getattr(init, "__wrapped__", init), "_TorchCompileInductorWrapper.__init__", "mode", "options")
    signature_takes(getattr(call, "__wrapped__", call), "_TorchCompileInductorWrapper.__call__", "config_patches")
    return {"wrapper": cls}
