"""Dynamo: frames, guards, sources, the compile of a frame, its profile of dynamic sizes; and the feature that rests
on them (the frame cache, frames/). Every private Dynamo name aotcache uses is lent from `_LENT`.
"""

from __future__ import annotations

from typing import Any

import torch

from aotcache.torch_glue.features import Mismatch, feature, signature_takes
from aotcache.torch_glue.lazy import lender

_LENT = {
    # the compile of a frame and its hooks (frames/hooks.py)
    "convert_frame": "torch._dynamo.convert_frame",
    "bytecode_transformation": "torch._dynamo.bytecode_transformation",
    "innermost_fn": "torch._dynamo.eval_frame:innermost_fn",
    "skip_code": "torch._dynamo.eval_frame:skip_code",
    "GuardedCode": "torch._dynamo.types:GuardedCode",
    "wrap_guarded_code": "torch._dynamo.types:wrap_guarded_code",
    "orig_code_map": "torch._dynamo.utils:orig_code_map",
    "get_builtins_dict": "torch._dynamo.output_graph:get_builtins_dict",
    # guards: their sources, serialization and load (frames/guards.py, frames/verify.py)
    "Guard": "torch._guards:Guard",
    "AttrSource": "torch._dynamo.source:AttrSource",
    "DictGetItemSource": "torch._dynamo.source:DictGetItemSource",
    "GlobalSource": "torch._dynamo.source:GlobalSource",
    "GlobalStateSource": "torch._dynamo.source:GlobalStateSource",
    "uninteresting_files": "torch._dynamo.guards:uninteresting_files",
    "get_closure_vars": "torch._dynamo.guards:_get_closure_vars",
    "load_guards_state": "torch._dynamo.package:load_guards_state",
    "load_guard_manager": "torch._dynamo.package:load_guard_manager",
    # what Dynamo folds while tracing (frames/process_state.py)
    "torch_variables": "torch._dynamo.variables.torch",
    # dynamic sizes: the profile and the switches (frames/dynamic_state.py)
    "pgo": "torch._dynamo.pgo",
    "dynamo_config": "torch._dynamo.config",
    # the kinds of size symbols (capture/symbolic.py)
    "SymT": "torch.utils._sympy.symbol:SymT",
    "symbol_is_type": "torch.utils._sympy.symbol:symbol_is_type",
    # symbolic floats (tensorify.py)
    "TensorifyState": "torch._dynamo.symbolic_convert:TensorifyState",
    "TensorifyScalarRestartAnalysis": "torch._dynamo.exc:TensorifyScalarRestartAnalysis",
    # tracing contexts, disabling, errors (compiler.py, frames/hooks.py, frames/verify.py, tensorify.py)
    "TracingContext": "torch._guards:TracingContext",
    "CompileContext": "torch._guards:CompileContext",
    "tracing": "torch._guards:tracing",
    "disable": "torch._dynamo:disable",
    "PackageError": "torch._dynamo.exc:PackageError",
    "GlobalStateGuard": "torch._C._dynamo.guards:GlobalStateGuard",
    "trace_structured": "torch._logging:trace_structured",
    # counters and metrics (compiler.py, wrapper_loading.py)
    "counters": "torch._dynamo.utils:counters",
    "get_metrics_context": "torch._dynamo.utils:get_metrics_context",
    "get_runtime_metrics_context": "torch._dynamo.utils:get_runtime_metrics_context",
    "trace_log": "torch._logging._internal:trace_log",
}
__getattr__ = lender(globals(), _LENT)


# ---- the frame cache (frames/hooks.py) ------------------------------------------------------------------------------
@feature(
    "frame_cache",
    "the frame cache",
    "compiled graphs are still cached",
    (
        "torch._dynamo.convert_frame._compile",
        "torch._dynamo.convert_frame.CheckFunctionManager",
        "torch._dynamo.guards.CheckFunctionManager.serialize_guards",
        "torch._dynamo.guards.GuardsStatePickler.reducer_override",
        "torch._dynamo.variables.functions.invoke_and_store_as_constant",
        "torch._dynamo.output_graph.DynamoTracerOutput._cleanup_output_graph (optional)",
        "torch._dynamo.variables.torch.TorchInGraphFunctionVariable.call_function",
        "torch._dynamo.variables.torch.constant_fold_functions",
        "torch._dynamo.variables.torch.constant_fold_functions_need_guards",
        "torch._dynamo.output_graph.OutputGraph.guard_on_key_order",
        "torch._C._dynamo.guards.GlobalStateGuard.__getstate__",
    ),
)
def _frame_cache() -> dict[str, Any]:
    import inspect
    import pickle

    from torch._dynamo import convert_frame
    from torch._dynamo import guards as dynamo_guards
    from torch._dynamo import output_graph as dynamo_output_graph
    from torch._dynamo.variables import functions as dynamo_functions
    from torch._dynamo.variables import nn_module as dynamo_nn_module

    compile_signature = signature_takes(
        convert_frame._compile, "convert_frame._compile", "code", "globals", "locals", "compiler_fn"
    )
    if not isinstance(convert_frame.CheckFunctionManager, type):  # subclassed by the hook
        raise Mismatch("convert_frame.CheckFunctionManager is not a class")
    serialize = dynamo_guards.CheckFunctionManager.serialize_guards
    signature_takes(serialize, "CheckFunctionManager.serialize_guards", "builder", "sorted_guards", "output_graph")
    if not issubclass(dynamo_guards.GuardsStatePickler, pickle.Pickler):
        raise Mismatch("GuardsStatePickler is not a pickle.Pickler")
    reduce = dynamo_guards.GuardsStatePickler.reducer_override
    constant = dynamo_functions.invoke_and_store_as_constant
    signature_takes(constant, "invoke_and_store_as_constant", "tx", "fn", "name")
    # The process-state queries Dynamo folds (frames/process_state.py): the table, and the call that folds them.
    from torch._dynamo.variables import torch as dynamo_torch

    fold_call = dynamo_torch.TorchInGraphFunctionVariable.call_function
    signature_takes(fold_call, "TorchInGraphFunctionVariable.call_function", "tx", "args", "kwargs")
    for table in ("constant_fold_functions", "constant_fold_functions_need_guards"):
        if not isinstance(getattr(dynamo_torch, table, None), dict):
            raise Mismatch(f"torch._dynamo.variables.torch.{table} is not a dict")
    if (
        torch.distributed.is_available()
        and torch.distributed.get_world_size not in dynamo_torch.constant_fold_functions
    ):
        raise Mismatch("constant_fold_functions lacks torch.distributed.get_world_size: the table moved")
    # The sets and dicts a trace iterated (their order is read on load: read_set.ORDER_KIND).
    if "guard_on_key_order" not in inspect.getsource(dynamo_output_graph.OutputGraph.__init__):
        raise Mismatch("OutputGraph keeps no guard_on_key_order: which containers a trace iterated is unknown")
    state = torch._C._dynamo.guards.GlobalStateGuard().__getstate__()
    if not isinstance(state, str) or "grad_mode" not in state:
        raise Mismatch("GlobalStateGuard's state is not the JSON text of the global state")
    return {
        "torch_function_class": dynamo_torch.TorchInGraphFunctionVariable,
        "torch_function_call": fold_call,
        "convert_frame": convert_frame,
        "dynamo_guards": dynamo_guards,
        "dynamo_output_graph": dynamo_output_graph,
        "dynamo_functions": dynamo_functions,
        "dynamo_nn_module": dynamo_nn_module,
        "compile": convert_frame._compile,
        "compile_signature": compile_signature,
        "check_function_manager": convert_frame.CheckFunctionManager,
        "serialize_guards": serialize,
        "reducer_override": reduce,
        "invoke_and_store_as_constant": constant,
    }
