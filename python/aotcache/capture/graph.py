"""Capture: turns Dynamo's GraphModule and example inputs into the C++ IR.

Only what torch alone can tell is gathered here (target identities, tensor metadata, constant bytes); encoding,
hashing and the cacheability rules are C++. Anything this module cannot express raises `Bypass` (fail closed).
"""

from __future__ import annotations

import builtins
import enum
import operator
import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.fx.immutable_collections import immutable_dict, immutable_list

from aotcache import _core
from aotcache.capture import distributed_tensor, op_pins
from aotcache.capture.code_digest import Unhashable, function_digest
from aotcache.capture.symbolic import SymbolTable
from aotcache.errors import Bypass
from aotcache.torch_glue import dispatch

# Node meta that can change what AOTAutograd and Inductor produce: keyed.
# `_fx_runtime_assert_preserve` marks a torch._check assertion node that passes must keep.
SEMANTIC_META = ("custom", "recompute", "ac_graph_id", "partitioner_tag", "_fx_runtime_assert_preserve")
# Node meta that records where a node came from or what it computed, derived from the graph and its inputs or used
# for debugging only: never keyed (a moved file or a renamed module must still hit).
IGNORED_META = frozenset(
    {
        "stack_trace",
        "example_value",
        "val",
        "tensor_meta",
        "nn_module_stack",
        "fwd_nn_module_stack",
        "source_fn_stack",
        "fwd_source_fn_stack",
        "tensor_dict",
        "grapharg",
        "seq_nr",
        "creation_timestamp",
        "from_node",
        "original_aten",
        "is_wrapped",
    }
)
_ELLIPSIS = _core.EllipsisTag()
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _is_plain(t: Any) -> bool:
    """A tensor keyed by its metadata. A FakeTensor input is one too: Dynamo's DDP optimizer (optimize_ddp, on by
    default under DistributedDataParallel) hands each piece of the split graph to the backend with fake inputs; only
    metadata is keyed, which a fake carries exactly. Not imported here: importing torch._subclasses.fake_tensor at
    this module's import cost a frames-served warm start 0.17 s (gpt2:train, llama:train, vit:train)."""
    if type(t) in _PLAIN:
        return True
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and type(t) is fake.FakeTensor


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _strip_torch(name: str) -> str:
    return name[len("torch.") :] if name.startswith("torch.") else name


def tensor_meta(t: torch.Tensor, what: str, alias: dict[str, Any] | None = None) -> _core.TensorMeta:
    """Metadata of a plain tensor or parameter; a subclass or a symbolic size bypasses. `alias`: the input's alias
    fields when it shares its storage with another input (`_alias_fields`)."""
    if not _is_plain(t):
        raise Bypass("tensor_subclass", f"{what} is a {type(t).__module__}.{type(t).__qualname__}")
    if t.is_conj() or t.is_neg():
        raise Bypass("conj_or_neg_input", f"{what} carries a lazy conjugate or negation bit")
    if t._has_symbolic_sizes_strides:
        raise Bypass("dynamic_shapes", f"{what} has symbolic sizes; dynamic shapes are not supported yet")
    return _meta_of(t, "Parameter" if isinstance(t, torch.nn.Parameter) else "Tensor", t.requires_grad, **(alias or {}))


def _meta_of(t: torch.Tensor, tensor_type: str, requires_grad: bool, **fields: Any) -> _core.TensorMeta:
    """The TensorMeta of `t` (dtype, device, sizes, strides, offset, layout, pinning, inference mode) with the given
    type text and requires_grad, and any further fields (alias, symbolic expressions). Positional, in the order of
    _core.TensorMeta's signature: this runs once per graph input on every compile."""
    device = t.device
    return _core.TensorMeta(
        _name(t.dtype),
        str(device),
        list(t.shape),
        list(t.stride()),
        t.storage_offset(),
        requires_grad,
        _name(t.layout),
        device.type == "cpu" and t.is_pinned(),
        tensor_type,
        t.is_inference(),
        **fields,
    )


def storage_groups(inputs: Sequence[Any]) -> list[int]:
    """Each input's storage-sharing group: inputs whose tensors share one storage get the same number, numbered
    0, 1, ... by first appearance among the inputs that share with at least one other; -1 for every other input.

    Sharing is by storage identity (what AOTAutograd groups aliased inputs by, `StorageWeakRef`), not by data
    pointer: two storages over one memory are two storages to AOTAutograd. A storage of no bytes is never shared,
    nor is a tensor without a storage (sparse, opaque) or a subclass (it bypasses in `tensor_meta`)."""
    members: dict[int, list[int]] = {}  # storage identity -> its inputs, in order of first appearance
    for i, x in enumerate(inputs):
        x = distributed_tensor.local_tensor(x)  # a DTensor shares through its local shard
        if not _is_plain(x):
            continue
        try:
            storage = x.untyped_storage()
        except (NotImplementedError, RuntimeError):
            continue
        if storage.nbytes() > 0:
            members.setdefault(storage._cdata, []).append(i)
    groups = [-1] * len(inputs)
    shared = [indices for indices in members.values() if len(indices) > 1]
    for number, indices in enumerate(shared):
        for i in indices:
            groups[i] = number
    return groups


def check_state_aliasing(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Raises Bypass when a parameter or buffer the compile lifts (get_attr state) shares a storage with another
    lifted tensor or with an input: AOTAutograd would see aliased inputs that the key's storage groups, which cover
    the graph inputs only, do not describe (a view of a weight passed as an input, a tied weight lifted twice)."""
    state = [
        *dict(gm.named_parameters(remove_duplicate=False)).values(),
        *dict(gm.named_buffers(remove_duplicate=False)).values(),
    ]
    if not state:
        return
    groups = storage_groups([*state, *example_inputs])
    if any(g >= 0 for g in groups[: len(state)]):
        raise Bypass(
            "aliased_state", "a lifted parameter or buffer shares its storage with another input of the compile"
        )


def _alias_fields(t: torch.Tensor, group: int) -> dict[str, Any] | None:
    """TensorMeta's alias fields of an input in storage group `group`: AOTAutograd regenerates mutated aliased
    inputs from a synthetic base, the inputs' common `_base` or else the whole storage, so both are keyed."""
    if group < 0:
        return None
    base = t._base
    return {
        "alias_group": group,
        "alias_storage_nbytes": t.untyped_storage().nbytes(),
        "alias_base": None if base is None else (list(base.shape), list(base.stride()), base.storage_offset()),
    }


def _dtensor_meta(
    x: Any, what: str, alias: dict[str, Any] | None, dtensors: distributed_tensor.Context | None
) -> _core.TensorMeta:
    """A DTensor input: its local tensor's metadata, its own requires_grad, and its spec as `tensor_type`."""
    local = x._local_tensor
    tensor_meta(local, f"{what} (local tensor)", alias)  # the checks of a plain tensor
    coordinate = dtensors is None or dtensors.coordinate
    return _meta_of(local, distributed_tensor.dtensor_type(x, coordinate), x.requires_grad, **(alias or {}))


def _has_symbols(fake: torch.Tensor) -> bool:
    return any(isinstance(d, torch.SymInt) for d in (*fake.shape, *fake.stride(), fake.storage_offset()))


def _symbolic_tensor_meta(
    real: torch.Tensor, fake: torch.Tensor, table: SymbolTable, what: str, alias: dict[str, Any] | None = None
) -> _core.TensorMeta:
    """A static TensorMeta of the example (its sizes are not keyed) carrying the symbolic shape's expressions."""
    base = tensor_meta(real, what, alias)
    if not _has_symbols(fake):
        return base  # a static input of a symbolic graph
    if alias is not None:
        # Whether the views overlap (and so whether AOTAutograd compiles a synthetic base) depends on the sizes the
        # key leaves out, and the storage size is the example's.
        raise Bypass("dynamic_shapes", f"{what} shares its storage with another input and has symbolic sizes")
    return _meta_of(
        real,
        "Parameter" if isinstance(real, torch.nn.Parameter) else "Tensor",
        real.requires_grad,
        size_exprs=[table.render(d) for d in fake.shape],
        stride_exprs=[table.render(d) for d in fake.stride()],
        storage_offset_expr=table.render(fake.storage_offset()),
    )


_names: dict[Any, str] = {}


def _name(torch_constant: Any) -> str:
    """'float32' for torch.float32, 'strided' for torch.strided (memoized: dtypes and layouts are few)."""
    name = _names.get(torch_constant)
    if name is None:
        name = _names[torch_constant] = _strip_torch(str(torch_constant))
    return name


def capture_inputs(
    example_inputs: Sequence[Any],
    fakes: Sequence[Any] | None = None,
    table: SymbolTable | None = None,
    dtensors: distributed_tensor.Context | None = None,
) -> list:
    """One entry per graph input: a TensorMeta, or the int/float/bool value itself. For a symbolic graph, `fakes`
    are the placeholders' fake values and `table` its canonical symbols: symbolic sizes enter as expressions.
    Inputs that share a storage carry their `storage_groups` number (Dynamo passes the real tensors, views keep
    their `_base`; the same tensor twice is one input after Dynamo, two here when called directly).
    A DTensor input and a DeviceMesh input are keyed by content (`dtensors`: distributed_tensor.context)."""
    out: list = []
    groups = storage_groups(example_inputs)
    for i, x in enumerate(example_inputs):
        fake = fakes[i] if fakes is not None else None
        if dtensors is not None and distributed_tensor.is_dtensor(x):
            if table and isinstance(fake, torch.Tensor) and _has_symbols(fake):
                raise Bypass("dynamic_shapes", f"input {i} is a DTensor with symbolic sizes; not supported yet")
            out.append(_dtensor_meta(x, f"input {i}", _alias_fields(x._local_tensor, groups[i]), dtensors))
        elif dtensors is not None and distributed_tensor.is_mesh(x):
            out.append(_core.TorchEnum("device_mesh", distributed_tensor.mesh_text(x, dtensors.coordinate)))
        elif table and isinstance(fake, torch.Tensor) and isinstance(x, torch.Tensor):
            out.append(_symbolic_tensor_meta(x, fake, table, f"input {i}", _alias_fields(x, groups[i])))
        elif isinstance(x, torch.Tensor):
            out.append(tensor_meta(x, f"input {i}", _alias_fields(x, groups[i])))
        elif table and isinstance(x, torch.SymInt):
            out.append(_core.SymExpr(table.render(x)))
        elif isinstance(x, _SYMBOLIC):
            raise Bypass("dynamic_shapes", f"input {i} is a symbolic {type(x).__name__}; not supported yet")
        elif type(x) in (int, float, bool):
            out.append(x)
        else:
            raise Bypass("unsupported_input", f"input {i} is a {type(x).__module__}.{type(x).__qualname__}")
    return out


_classified: dict[Any, tuple[str, str]] = {}


def _classify_function(target: Any) -> tuple[str, str]:
    """(target kind, qualified name), memoized per target: a graph calls few distinct functions many times."""
    try:
        return _classified[target]
    except KeyError:
        result = _classified[target] = _classify_uncached(target)
        return result
    except TypeError:  # unhashable callable
        return _classify_uncached(target)


def _classify_uncached(target: Any) -> tuple[str, str]:
    if isinstance(target, dispatch.OpOverload):
        name = f"{target.namespace}::{target._opname}.{target._overloadname}"
        return ("aten_op" if target.namespace in op_pins.TORCH_OP_NAMESPACES else "custom_op"), name
    if isinstance(target, dispatch.HigherOrderOperator):
        return "higher_order_op", f"torch.ops.higher_order.{target.name()}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__qualname__
    if module in ("_operator", "operator") and getattr(operator, name, None) is target:
        return "operator", f"operator.{name}"
    if module == "builtins" and getattr(builtins, name, None) is target:
        return "builtin", name
    if module == "torch" or module.startswith(("torch.", "torch._C")):
        return "torch_function", f"{module}.{name}"
    return "python_function", f"{module}.{name}"


class _ArgNormalizer:
    """Maps FX argument values to the plain and tagged values the IR binding accepts."""

    def __init__(
        self,
        positions: dict[torch.fx.Node, int],
        table: SymbolTable | None = None,
        dtensors: distributed_tensor.Context | None = None,
    ):
        self._positions = positions
        self._table = table
        self._dtensors = dtensors

    def knows_symbols(self, symbols: set) -> bool:
        """Whether every size symbol is one of the graph inputs' (a size computed from data, e.g. a value read with
        item(), is not: no guard over the inputs can say when the compile holds)."""
        return not symbols or (self._table is not None and self._table.knows(symbols))

    def symbolic_float(self, value: torch.SymFloat, node: torch.fx.Node) -> str:
        """The canonical text of a node's symbolic float value (over the inputs' float and size symbols)."""
        if self._table is not None:
            return self._table.render_scalar(value)
        if not value.node.expr.free_symbols:
            # A constant SymFloat in a static graph: torch >= 2.15 retraces a frame whose float tensorify could not
            # turn into tensor arithmetic with that float specialized, and the retrace's `3.0 * 2` still carries a
            # SymFloat over no symbol. Keyed as the constant it is.
            return SymbolTable().render_scalar(value)
        raise Bypass("dynamic_shapes", f"node {node.name} computes a symbolic float of no graph input")

    def __call__(self, value: Any, node: torch.fx.Node) -> Any:
        """`node` is the node whose arguments are being normalized: named in a bypass."""
        t = type(value)
        if value is None or t in (bool, int, float, str):
            return value
        if t is torch.fx.Node:
            return _core.NodeRef(self._positions[value])
        if t in (list, tuple, torch.Size, immutable_list):  # Dynamo stores list arguments as immutable_list
            items = [self(v, node) for v in value]
            return items if t in (list, immutable_list) else tuple(items)
        if t in (dict, immutable_dict):
            return {self(k, node): self(v, node) for k, v in value.items()}
        if t is slice:
            return _core.Slice(self(value.start, node), self(value.stop, node), self(value.step, node))
        if value is Ellipsis:
            return _ELLIPSIS
        if t is complex:  # a constant such as (1 + 2j): both parts bit-exact (float.hex), tagged apart from tuples
            return _core.TorchEnum("complex", f"{value.real.hex()},{value.imag.hex()}")
        if t is torch.dtype:
            return _core.TorchEnum("dtype", _strip_torch(str(value)))
        if t is torch.device:
            return _core.TorchEnum("device", str(value))
        if t is torch.layout:
            return _core.TorchEnum("layout", _strip_torch(str(value)))
        if t is torch.memory_format:
            return _core.TorchEnum("memory_format", _strip_torch(str(value)))
        if isinstance(value, enum.Enum):  # e.g. torch.utils.checkpoint.CheckpointPolicy: stable by class and name
            return _core.TorchEnum(f"{t.__module__}.{t.__qualname__}", value.name)
        if isinstance(value, dispatch.OpOverload):  # e.g. the op an auto_functionalized node runs
            kind, name = _classify_function(value)
            if kind == "aten_op":
                return _core.TorchEnum("op", name)
            pin = op_pins.op_pin(value)
            if pin is None:
                raise Bypass("custom_op_unpinned", _unpinned_message(node, name))
            return _core.TorchEnum("custom_op", f"{name} {pin}")
        if self._table and isinstance(value, torch.SymInt):
            return _core.SymExpr(self._table.render(value))
        if isinstance(value, _SYMBOLIC):
            raise Bypass("dynamic_shapes", f"node {node.name} has a symbolic argument of no graph input's symbols")
        if self._dtensors is not None:
            if distributed_tensor.is_placement(value):  # Shard(-1), Replicate(), Partial(sum)
                return _core.TorchEnum("placement", distributed_tensor.placement_text(value))
            if distributed_tensor.is_mesh(value):
                return _core.TorchEnum("device_mesh", distributed_tensor.mesh_text(value, self._dtensors.coordinate))
        raise Bypass("unencodable_value", f"node {node.name} has an argument of type {t.__module__}.{t.__qualname__}")


_KNOWN_META = IGNORED_META | frozenset(SEMANTIC_META)


def _semantic_meta(node: torch.fx.Node, normalize: _ArgNormalizer) -> dict[str, Any] | None:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    value = node.meta.get("example_value")
    symbolic_float = None
    if isinstance(value, torch.SymFloat):
        # A Python float made symbolic (an LR scheduler's learning rate; under dynamic=True every float argument, such
        # as LayerNorm's eps) reaches the graph as a 0-d tensor input read back with item(). Its value is keyed as the
        # expression over the inputs' float symbols, or as the constant Dynamo already specialized it to
        # (tensorify.py): the two compile differently.
        symbolic_float = normalize.symbolic_float(value, node)
    if "unbacked_bindings" in node.meta or (
        isinstance(value, (torch.SymInt, torch.SymBool))
        and (free_unbacked_symbols(value) or not normalize.knows_symbols(value.node.expr.free_symbols))
    ):
        # A data-dependent size (nonzero, item() under capture_scalar_outputs, unbacked or not): no input carries it,
        # so no guard over the inputs could say when a compile is valid. Documented as a dynamic_shapes bypass.
        raise Bypass("dynamic_shapes", f"node {node.name} produces a data-dependent size")
    if not _KNOWN_META.issuperset(node.meta):
        unknown = sorted(node.meta.keys() - _KNOWN_META)
        raise Bypass("unknown_node_meta", f"node {node.name} carries node meta {unknown} that aotcache does not know")
    meta = {k: normalize(node.meta[k], node) for k in SEMANTIC_META if k in node.meta}
    if symbolic_float is not None:
        meta["symbolic_float"] = symbolic_float
    return meta or None


# GraphModule.meta that Dynamo sets for its own bookkeeping: names, ids. Any other key (cudagraph_annotation, ...)
# may change the compile and bypasses.
IGNORED_GRAPH_META = frozenset({"dynamo_flat_name_to_original_fqn", "dynamo_compile_id", "backend_id"})


def _unpinned_message(node: torch.fx.Node, op_name: str) -> str:
    qualname = op_name.rsplit(".", 1)[0]
    return (
        f"node {node.name} calls custom op {op_name}, whose implementation is not pinned into the key: call "
        f'aotcache.register_op_version("{qualname}", "<version>") and bump the version when it changes, or define '
        "it with torch.library.custom_op (with its functions' source available) so aotcache can digest it"
    )


# GraphModule.meta of a higher-order op's body that aotcache pins into the key (see _subgraph_meta).
_CHECKPOINT_CONTEXT_FN = "_checkpoint_context_fn"


def capture_graph(
    gm: torch.fx.GraphModule,
    table: SymbolTable | None = None,
    dtensors: distributed_tensor.Context | None = None,
) -> _core.Graph:
    """The IR of `gm`: nodes in order, referred to by position; higher-order-op bodies as nested graphs."""
    if hasattr(gm, "saved_tensors_hooks_pack_0"):
        raise Bypass("saved_tensors_hooks", "saved-tensor hooks are active; their code is not in the key")
    unknown = gm.meta.keys() - IGNORED_GRAPH_META
    if unknown:
        raise Bypass(
            "unknown_graph_meta", f"the graph module carries meta {sorted(unknown)} that aotcache does not know"
        )
    return _capture(gm, "", {}, table, dtensors)


def _capture(
    gm: torch.fx.GraphModule,
    path: str,
    subgraphs: dict[int, tuple],
    table: SymbolTable | None = None,
    dtensors: distributed_tensor.Context | None = None,
) -> _core.Graph:
    """`path` prefixes node names in bypass messages ("wrap_body_0/"); `subgraphs` memoizes bodies that several
    get_attr nodes share (invoke_subgraph), by object identity within this one capture."""
    graph = _core.Graph()
    positions: dict[torch.fx.Node, int] = {}
    normalize = _ArgNormalizer(positions, table, dtensors)
    lifted = _lifted_state(gm) if not path else {}
    for node in gm.graph.nodes:
        constant_meta = constant_bytes = subgraph = None
        pins: dict[str, Any] = {}
        if node.op in ("placeholder", "output"):
            kind, target = "none", str(node.target)
        elif node.op == "call_function":
            kind, target = _classify_function(node.target)
            if kind == "custom_op":
                pin = op_pins.op_pin(node.target)
                if pin is not None:
                    pins["aotcache.op_version"] = pin
        elif node.op == "call_method":
            kind, target = "tensor_method", str(node.target)
            patched = _patched_tensor_method(str(node.target), f"node {path}{node.name}")
            if patched is None and dtensors is not None and node.args and isinstance(node.args[0], torch.fx.Node):
                patched = distributed_tensor.patched_method(node.args[0].meta.get("example_value"), str(node.target))
            if patched is not None:
                pins["aotcache.tensor_method"] = patched
        elif node.op == "call_module":
            sub = gm.get_submodule(node.target)
            kind, target = "module", f"{type(sub).__module__}.{type(sub).__qualname__}"
            encoded = _module_encoding(sub, f"node {path}{node.name}")
            if encoded is not None:
                pins["aotcache.module"] = encoded
        elif node.op == "get_attr":
            kind, target = "attribute", str(node.target)
            value = _fetch_attr(gm, node.target)
            if isinstance(value, torch.Tensor) and node.target in lifted:
                # A parameter or buffer of the graph module (a compiled optimizer step reads the weights and their
                # state this way): AOTAutograd lifts it into an input of the compiled code, so its value is not in
                # the code and not in the key (the live tensor is passed at every call: compiler.bind_to_graph);
                # its metadata and its position among the lifted inputs are.
                constant_meta = tensor_meta(value, f"node {path}{node.name} (state {node.target})")
                constant_bytes = b""
                pins["aotcache.lifted_state"] = lifted[node.target]
            elif isinstance(value, torch.Tensor):
                constant_meta = tensor_meta(value, f"node {path}{node.name} (constant {node.target})")
                constant_bytes = _tensor_bytes(value)
            elif isinstance(value, torch.fx.GraphModule):
                kind = "subgraph"
                memo = subgraphs.get(id(value))
                if memo is None:
                    memo = subgraphs[id(value)] = (
                        value,  # held so that id() stays unique while the memo lives
                        _capture(value, f"{path}{node.name}/", subgraphs, table, dtensors),
                        _subgraph_meta(value, f"{path}{node.name}"),
                    )
                _, subgraph, body_pins = memo
                pins.update(body_pins)
        else:
            raise Bypass("unknown_node", f"node {path}{node.name} has op {node.op}")
        args = normalize(node.args, node)
        kwargs = {k: normalize(v, node) for k, v in node.kwargs.items()} if node.kwargs else {}
        meta = _semantic_meta(node, normalize) if node.meta else None
        if pins:
            meta = {**(meta or {}), **pins}
        try:
            positions[node] = graph.add_node(
                node.name, node.op, kind, target, args, kwargs, constant_meta, constant_bytes, meta, subgraph
            )
        except _core.UnencodableError as e:
            raise Bypass("unencodable_value", f"node {path}{node.name} (target {target}): {e}") from None
    return graph


def _patched_tensor_method(name: str, where: str) -> str | None:
    """What `torch.Tensor.<name>` is when it is not torch's own (a patch such as `torch.Tensor.relu =
    torch.Tensor.sigmoid`): a call_method node names the method, and AOTAutograd traces whatever the name holds.
    None for torch's own C method or Python method; else its content, in the key. Raises Bypass when a
    replacement's content cannot be pinned."""
    import inspect

    attr = inspect.getattr_static(torch.Tensor, name, None)
    if attr is None:
        return None
    if getattr(attr, "__objclass__", None) is dispatch.TensorBase and getattr(attr, "__name__", None) == name:
        return None
    if getattr(attr, "__module__", None) == "torch._tensor" and getattr(attr, "__qualname__", None) == f"Tensor.{name}":
        return None
    objclass = getattr(attr, "__objclass__", None)
    if objclass is not None:
        return f"descriptor {objclass.__module__}.{objclass.__qualname__}.{getattr(attr, '__name__', '?')}"
    try:
        return "function " + function_digest(attr)
    except Unhashable as e:
        raise Bypass(
            "tensor_method_patched", f"{where}: torch.Tensor.{name} is replaced by code not pinnable: {e}"
        ) from None


def _lifted_state(gm: torch.fx.GraphModule) -> dict[str, str]:
    """The top-level graph module's parameters and buffers by attribute path: their kind and position in the order
    AOTAutograd lifts them (compiler.graph_state), e.g. "parameter 0", "buffer 2"."""
    out: dict[str, str] = {}
    params = dict(gm.named_parameters(remove_duplicate=False))
    for i, name in enumerate(params):
        out.setdefault(name, f"parameter {i}")
    for i, name in enumerate(dict(gm.named_buffers(remove_duplicate=False)), start=len(params)):
        out.setdefault(name, f"buffer {i}")
    return out


def _subgraph_meta(body: torch.fx.GraphModule, where: str) -> dict[str, Any]:
    """Pins for a higher-order op body's GraphModule.meta: a selective-checkpointing policy enters the key by a
    stable digest (or the user's `cache_hash` on the context_fn, as torch accepts); unknown meta bypasses."""
    unknown = body.meta.keys() - {_CHECKPOINT_CONTEXT_FN}
    if unknown:
        raise Bypass(
            "unknown_graph_meta", f"subgraph {where} carries meta {sorted(unknown)} that aotcache does not know"
        )
    if _CHECKPOINT_CONTEXT_FN not in body.meta:
        return {}
    return {"aotcache.checkpoint_context_fn": _context_fn_pin(body.meta[_CHECKPOINT_CONTEXT_FN], where)}


def _context_fn_pin(context_fn: Any, where: str) -> str:
    cache_hash = getattr(context_fn, "cache_hash", None)
    if cache_hash is not None:
        return f"cache_hash:{cache_hash}"
    try:
        return f"source:{function_digest(context_fn)}"
    except Unhashable as e:
        raise Bypass(
            "checkpoint_policy_unhashable",
            f"the selective-checkpointing context_fn of {where} cannot be pinned into the key: {e}; set a "
            "`cache_hash` attribute on it (bump it when the policy changes)",
        ) from None


_MODULE_SCALARS = (type(None), bool, int, float, str)


def _module_encoding(module: torch.nn.Module, where: str) -> dict[str, Any] | None:
    """A built-in torch.nn leaf module as data: its type, hyperparameters (public attributes), training flag, and
    its parameters' and buffers' metadata. None for any other module (the rules bypass)."""
    t = type(module)
    if not t.__module__.startswith("torch.nn.modules.") or next(module.children(), None) is not None:
        return None
    if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks:
        raise Bypass("module_hooks", f"{where} calls a module with hooks; their code is not part of the key")
    hyper: dict[str, Any] = {"training": module.training}
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or name == "training":
            continue
        hyper[name] = _plain(value, f"{where}: attribute {name} of {t.__qualname__}")
    # Parameters and buffers are inputs of the compiled code (AOTAutograd lifts them; a hit passes the live ones),
    # so their metadata is keyed, not their values. Freezing, which would bake values in, bypasses (backend).
    tensors: dict[str, Any] = {}
    for kind, named in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for name, value in named:
            meta = tensor_meta(value, f"{where}: {kind} {name}")
            tensors[f"{kind}.{name}"] = (
                meta.dtype,
                tuple(meta.sizes),
                tuple(value.stride()),
                value.storage_offset(),
                value.requires_grad,
                str(value.device),
                type(value).__name__,
            )
    return {"hyperparameters": hyper, "tensors": tensors}


def _plain(value: Any, what: str) -> Any:
    if type(value) in _MODULE_SCALARS:
        return value
    if type(value) in (tuple, list):
        return tuple(_plain(v, what) for v in value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    raise Bypass("unencodable_value", f"{what} is a {type(value).__module__}.{type(value).__qualname__}")


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _tensor_bytes(t: torch.Tensor) -> bytes:
    flat = t.detach().to("cpu").contiguous()
    return bytes(flat.untyped_storage())[flat.storage_offset() * flat.element_size() :][
        : flat.numel() * flat.element_size()
    ]
