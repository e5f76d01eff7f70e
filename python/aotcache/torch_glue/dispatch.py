"""The dispatcher's side of torch: operator overloads and higher-order operators, fake tensors, the C extension's
switches and tables, custom-op definitions. Lent from `_LENT` (no feature of aotcache rests on their shape beyond
what the key reads, so there is no probe here).
"""

from __future__ import annotations

from aotcache.torch_glue.lazy import lender

_LENT = {
    # what a graph node calls (capture/graph.py, capture/code_digest.py, compiler.py, capture/op_pins.py)
    "OpOverload": "torch._ops:OpOverload",
    "OpOverloadPacket": "torch._ops:OpOverloadPacket",
    "HigherOrderOperator": "torch._ops:HigherOrderOperator",
    "maybe_get_opdef": "torch._library.custom_ops:_maybe_get_opdef",
    # tensors while tracing (compiler.py, frames/hooks.py, frames/verify.py)
    "FakeTensor": "torch._subclasses:FakeTensor",
    "FakeTensorMode": "torch._subclasses.fake_tensor:FakeTensorMode",
    "TensorBase": "torch._C:TensorBase",
    # the process's switches and tables in the C extension (global_state.py)
    "torch_C": "torch._C",
    "VariableFunctions": "torch._C:_VariableFunctions",
    "autocast_supported_devices": "torch._C:_autocast_supported_devices",
}
__getattr__ = lender(globals(), _LENT)
