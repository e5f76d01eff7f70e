"""The process-wide state a frame entry carries (frames/process_state.py), derived from torch's own tables: every
function Dynamo constant-folds is classified, every one whose answer is process state is recorded and answered again
on load, and the A/B pairs of frame_pairs.PROCESS_STATE_OPERATORS cover each query this machine can put in two
states (the pairs themselves run in test_frame_pairs.py's attack table)."""

from __future__ import annotations

import collections
import json
import math

import frame_pairs
import pytest
import torch

from aotcache import global_state
from aotcache.frames import content, process_state, read_set

# Stateful queries whose two states this machine (CPU only, one process) cannot produce: the reason for each.
CANNOT_VARY_HERE = {
    "torch.cuda.is_available": "no CUDA device: always False here (the environment component keys the GPUs)",
    "torch.cuda.get_device_properties": "no CUDA device",
    "torch.accelerator.is_available": "no accelerator here",
    "torch.xpu.is_available": "no XPU here",
    "torch.xpu.get_device_properties": "no XPU here",
    "torch.distributed.is_available": "fixed by the build (the environment component keys the build)",
    "torch._utils._get_device_index": "depends on the current accelerator device: none here",
    "torch.autograd._is_checkpoint_valid": "only False inside a non-reentrant checkpoint's backward",
    "torch.get_autocast_gpu_dtype": "the CUDA autocast dtype: varied like get_autocast_dtype, on a GPU machine",
    "torch.backends.mps.is_available": "no MPS here (torch 2.14+ folds it; the environment component keys the machine)",
    "torch.backends.mps.is_built": "fixed by the build (torch 2.14+ folds it; the environment keys the build)",
    "torch.mps.is_available": "no MPS here (torch 2.14+ folds it)",
    "torch.mtia.is_available": "no MTIA here (torch 2.14+ folds it)",
    "torch._C._get_privateuse1_backend_name": "renamed once per process (rename_privateuse1_backend): one state here",
}
# The operators of frame_pairs that put A and B in two states of each query.
VARIED_BY = {
    "torch.distributed.distributed_c10d.is_initialized": "dist_initialized",
    "torch.distributed.distributed_c10d.get_world_size": "dist_world_size",
    "torch.distributed.distributed_c10d.get_rank": "dist_rank",
    "torch.get_autocast_dtype": "autocast_dtype_read",
    "torch.is_autocast_enabled": "autocast_enabled_read",
    "torch.is_autocast_cpu_enabled": "autocast_enabled_read",
    "torch._C._is_any_autocast_enabled": "autocast_enabled_read",
    "torch.is_autocast_cache_enabled": "autocast_cache_read",
    "torch.get_default_dtype": "default_dtype",
    "torch._C._get_cublas_allow_tf32": "cublas_tf32_read",
}


def test_every_folded_function_is_classified():
    """A torch that adds a folded function fails here until it is classified (pure, guarded or a query)."""
    folded, guarded = process_state.folded_tables()
    assert folded, "torch's constant_fold_functions is empty: the table moved"
    queries = set(process_state.stateful_queries().values())
    for fn in folded:
        name = process_state.query_name(fn)
        assert (name in process_state.PURE) + (fn in guarded) + (name in queries) == 1, name
    # The distributed and autocast queries of the issue are queries (never pure, never left to Dynamo).
    for name in (
        "torch.distributed.distributed_c10d.is_initialized",
        "torch.distributed.distributed_c10d.get_world_size",
        "torch.get_autocast_dtype",
    ):
        assert name in queries, name
    for name in process_state.PURE:  # pure names are names of this torch's table, not stale ones
        assert name in {process_state.query_name(fn) for fn in folded}, name


def test_every_query_is_varied_by_a_pair_or_says_why_not():
    queries = set(process_state.stateful_queries().values())
    unexplained = queries - set(VARIED_BY) - set(CANNOT_VARY_HERE)
    assert not unexplained, f"queries without an A/B pair or a reason: {sorted(unexplained)}"
    for query, operator in VARIED_BY.items():
        assert operator in frame_pairs.BY_OPERATOR, (query, operator)
        if query in queries:
            op = frame_pairs.BY_OPERATOR[operator]
            assert op.setup or op.lib, operator  # A and B differ in process state, not in source


def test_a_recorded_call_is_answered_again_and_compared():
    from torch._dynamo.variables import ConstantVariable

    queries: dict = {}
    process_state.record_call(queries, torch.get_autocast_dtype, [ConstantVariable.create("cpu")], {})
    process_state.record_call(queries, torch.is_floating_point, [], {})  # pure: not recorded
    recorded = process_state.answers(queries)
    assert [row[0] for row in recorded] == ["torch.get_autocast_dtype"]
    assert process_state.queries_changed(recorded) is None
    old = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.float16 if old != torch.float16 else torch.bfloat16)
    try:
        assert "get_autocast_dtype" in process_state.queries_changed(recorded)
    finally:
        torch.set_autocast_dtype("cpu", old)
    assert process_state.queries_changed(recorded) is None


def test_a_call_with_an_object_argument_cannot_be_recorded():
    from torch._dynamo.variables import UserDefinedObjectVariable

    with pytest.raises(process_state.Unrecordable):
        process_state.record_call({}, torch.distributed.get_rank, [UserDefinedObjectVariable(object())], {})


def test_the_global_and_compile_state_are_compared():
    facts = {"queries": [], "global_state": process_state.global_state_now()}
    facts["compile_state"] = process_state.compile_state_digest()
    assert process_state.facts_changed(facts) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert "global state" in process_state.facts_changed(facts)
    torch.backends.cuda.enable_flash_sdp(False)  # an attention switch: lowering picks another kernel
    try:
        assert "compile state" in process_state.facts_changed(facts)
    finally:
        torch.backends.cuda.enable_flash_sdp(True)
    assert process_state.facts_changed({}) == "the candidate carries no process state"


def test_attention_switches_are_in_the_graph_key():
    before = json.dumps(global_state.autograd_state(), sort_keys=True)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        during = json.dumps(global_state.autograd_state(), sort_keys=True)
    assert before != during
    assert {"_get_flash_sdp_enabled", "_get_math_sdp_enabled", "_get_sdp_priority_order"} <= set(
        global_state.autograd_state()["sdpa"]
    )


@pytest.mark.parametrize(
    "a,b",
    [(math.nan, -math.nan), (0.0, -0.0), (1.0, 1.0000000000000002), (complex(0.0, 1), complex(-0.0, 1))],
)
def test_floats_are_compared_by_their_bits(a, b):
    fp = read_set.Fingerprints()
    assert fp.of(a) != fp.of(b)
    assert not content.matches(content.describe(a), b)
    assert content.matches(content.describe(a), a)


def test_scalar_subclasses_by_class_and_value():
    class Scale(float):
        pass

    class Other(float):
        pass

    fp = read_set.Fingerprints()
    assert fp.of(Scale(2.0)) != fp.of(Scale(3.0))
    assert fp.of(Scale(2.0)) != fp.of(Other(2.0))
    assert fp.of(Scale(2.0)) == read_set.Fingerprints().of(Scale(2.0))


def test_enum_members_by_class_and_name():
    import enum

    class Local(enum.Enum):
        A = 1

    with pytest.raises(content.Unportable):
        content.describe(Local.A)  # not importable by name
    from peft_like_enum import Kind

    description = content.describe(Kind.LORA)
    assert description == ("enum", "peft_like_enum", "Kind", "LORA")
    assert content.matches(description, Kind.LORA) and not content.matches(description, Kind.IA3)


def test_iteration_order_of_sets_and_ordered_dicts():
    import collections

    fp = read_set.Fingerprints()
    a, b = {8, 16}, {16, 8}
    assert a == b and list(a) != list(b)
    assert read_set._reading(read_set.ORDER_KIND, a, fp) != read_set._reading(read_set.ORDER_KIND, b, fp)
    d = collections.OrderedDict(x=1, y=2)
    e = collections.OrderedDict(x=1, y=2)
    e.move_to_end("x")
    assert read_set._reading(read_set.ORDER_KIND, d, fp) != read_set._reading(read_set.ORDER_KIND, e, fp)


def test_a_rebound_torch_function_is_in_the_graph_key():
    """Decompositions call torch functions by name while compiling (softmax's calls torch.exp): a process that
    rebinds one compiles other code (found by the generated pair rebind_torch_to_python.hf_gpt2_train: inductor
    gives NaN there, the graph cache served the other process's kernels)."""
    assert global_state.rebound_torch_functions() == {}
    original = torch.exp
    try:
        torch.exp = lambda t: t * 2.0
        first = global_state.rebound_torch_functions()
        torch.exp = lambda t: t * 3.0
        second = global_state.rebound_torch_functions()
    finally:
        torch.exp = original
    assert set(first) == {"exp"} and first != second
    assert global_state.rebound_torch_functions() == {}


def test_numpy_values_by_content():
    import numpy as np

    fp = read_set.Fingerprints()
    assert fp.of(np.array([1.0, 2.0])) != fp.of(np.array([1.0, 3.0]))
    assert fp.of(np.array([1.0, 2.0])) != fp.of(np.array([1.0, 2.0], dtype=np.float32))
    assert fp.of(np.float64(math.nan)) != fp.of(np.float64(-math.nan))
    assert fp.of(np.array([1, 2])) == read_set.Fingerprints().of(np.array([1, 2]))


def test_hook_dicts_read_by_their_hooks_not_their_handle_ids():
    """A hook dict's keys are handle ids from a process-wide counter that compiles move: the same hooks under other
    ids read the same (a DTensor job's frames were never served warm); another order, another hook, or a hook moved
    in or out of a companion dict (with_kwargs, always_called) reads other content."""
    fp = read_set.Fingerprints()

    def hook(module, args, out):
        return out * 2

    def other(module, args, out):
        return out + 1

    def reading(model, kind=read_set.ORDER_KIND, attr="_forward_hooks"):
        scope = {"m": model}
        name = f"L['m'].fc.{attr}"
        value = getattr(model.fc, attr)
        return read_set._reading(kind, value, fp, read_set._hook_entries(name, value, scope, {}))

    def model(*hooks, **kw):
        m = torch.nn.Module()
        m.fc = torch.nn.Linear(2, 2)
        for h in hooks:
            m.fc.register_forward_hook(h, **kw)
        return m

    first = model(hook, other)
    torch.utils.hooks.RemovableHandle(collections.OrderedDict())  # moves the counter: other ids, same hooks
    second = model(hook, other)
    assert list(first.fc._forward_hooks) != list(second.fc._forward_hooks)
    for kind in (read_set.ORDER_KIND, "DICT_KEYS_MATCH"):
        assert reading(first, kind) == reading(second, kind)
    assert reading(first) != reading(model(other, hook))
    assert reading(first) != reading(model(hook))
    assert reading(first) != reading(model(hook, other, always_call=True))
    assert reading(first, "DICT_KEYS_MATCH") != reading(model(hook, other, always_call=True), "DICT_KEYS_MATCH")
    # Any other dict keeps its keys: they are the program's values.
    plain = torch.nn.Module()
    plain.fc = type("Holder", (), {})()
    plain.fc._forward_hooks = {1: hook}
    assert read_set._hook_entries("L['m'].fc._forward_hooks", plain.fc._forward_hooks, {"m": plain}, {}) is None


def test_a_decomposition_or_lowering_of_its_own_is_in_the_graph_key():
    """Inductor decomposes and lowers each op through its tables: a process that registers its own entry compiles
    other code from the same graph (the attack pair inductor_decomposition: before, the graph cache served the
    other process's gelu)."""
    from torch._inductor import decomposition, lowering

    gelu, relu = torch.ops.aten.gelu.default, torch.ops.aten.relu.default
    # Another test of this worker may have compiled already: Inductor would then decompose with its copy of the
    # table (below), which an entry registered now does not reach. Start from a process before its first compile.
    decomposition.fast_random_decomps.cache_clear()
    assert global_state.user_compile_table_entries() == {}
    old_decomposition, old_lowering = decomposition.decompositions[gelu], lowering.lowerings[relu]
    try:
        decomposition.decompositions[gelu] = lambda x, approximate="none": x * torch.sigmoid(1.702 * x)
        first = global_state.user_compile_table_entries()
        assert list(first) == ["decompositions:aten.gelu.default"]
        decomposition.decompositions[gelu] = lambda x, approximate="none": x * torch.sigmoid(1.5 * x)
        assert global_state.user_compile_table_entries() != first
        decomposition.decompositions[gelu] = decomposition.decompositions[torch.ops.aten.silu.default]
        assert list(global_state.user_compile_table_entries()) == ["decompositions:aten.gelu.default"]
        decomposition.decompositions[gelu] = old_decomposition
        lowering.lowerings[relu] = lowering.lowerings[torch.ops.aten.sigmoid.default]
        assert list(global_state.user_compile_table_entries()) == ["lowerings:aten.relu.default"]
        assert global_state.autograd_state()["compile_tables"] == global_state.user_compile_table_entries()
    finally:
        decomposition.decompositions[gelu], lowering.lowerings[relu] = old_decomposition, old_lowering
    assert global_state.user_compile_table_entries() == {}
    # After the process's first compile Inductor decomposes with its copy of the table: an entry registered then
    # changes nothing and is not keyed; one in the copy is.
    decomposition.fast_random_decomps()
    try:
        decomposition.decompositions[gelu] = lambda x, approximate="none": x * torch.sigmoid(1.702 * x)
        assert global_state.user_compile_table_entries() == {}
        decomposition.fast_random_decomps.cache_clear()
        decomposition.fast_random_decomps()
        assert list(global_state.user_compile_table_entries()) == ["decompositions:aten.gelu.default"]
    finally:
        decomposition.decompositions[gelu] = old_decomposition
        decomposition.fast_random_decomps.cache_clear()
    assert global_state.user_compile_table_entries() == {}
