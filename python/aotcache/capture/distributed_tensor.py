"""DTensor graphs by content: the device meshes, DTensor inputs, placements and DTensor dispatch state a
tensor-parallel graph (`parallelize_module`, `distribute_tensor`, `DTensor.from_local`) depends on, as key text.

Dynamo hands such a graph to the backend with the DeviceMesh as an input (an opaque object the compiled code
passes to collectives) and DTensor parameters; AOTAutograd traces through DTensor's dispatch on each input's local
tensor and bakes into the code what that dispatch decided: the collectives and the process-group names they run
on, the local shapes, the placements of every intermediate. So the key holds:
- a mesh by layout, never by identity: the root mesh's ranks, this mesh's layout over them, device type, dimension
  names, and the names of the process groups its dimensions run on (the compiled collectives name them). These are
  the same on every rank, so a rank-independent graph is one entry for every rank;
- this rank's coordinate in the mesh only where the code can depend on it: an unevenly sharded input (each rank's
  padding and local sizes differ) or a random op (DTensor's random offsets are computed from the coordinate);
- a DTensor input by its local tensor's metadata (in the TensorMeta) and its spec (`tensor_type`): placements,
  shard order, global shape, stride and dtype, whether it is a Parameter;
- placements in node arguments (`Shard(-1)`, `Replicate()`, `Partial(sum)`) by kind and fields;
- DTensor's dispatch state that changes what it decides (config component `dtensor`): implicit replication, and the
  code of every sharding strategy or op handler registered from outside torch.

Nothing here imports torch.distributed: a process that never loaded DTensor never pays for this module.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Sequence
from typing import Any

import torch

from aotcache.capture.code_digest import Unhashable, function_digest
from aotcache.errors import Bypass

# Name fragments of ops whose result on a sharded DTensor depends on the rank's offset in the global tensor.
_RANDOM_NAMES = (
    "rand",
    "dropout",
    "bernoulli",
    "normal",
    "uniform",
    "multinomial",
    "exponential",
    "cauchy",
    "geometric",
    "poisson",
    "rrelu",
)


def _mesh_class() -> Any:
    module = sys.modules.get("torch.distributed.device_mesh")
    return getattr(module, "DeviceMesh", None) if module is not None else None


def _dtensor_class() -> Any:
    module = sys.modules.get("torch.distributed.tensor._api")
    return getattr(module, "DTensor", None) if module is not None else None


def is_mesh(x: Any) -> bool:
    cls = _mesh_class()
    return cls is not None and isinstance(x, cls)


def is_dtensor(x: Any) -> bool:
    cls = _dtensor_class()
    return cls is not None and type(x) is cls


def local_tensor(x: Any) -> Any:
    """The tensor whose storage an input owns: a DTensor's local shard, any other value itself."""
    return x._local_tensor if is_dtensor(x) else x


class Context:
    """What a DTensor graph's key needs beyond its nodes: whether this rank's coordinate is keyed, and the
    dispatch state rows (config component `dtensor`)."""

    def __init__(self, coordinate: bool, rows: list[str]):
        self.coordinate = coordinate
        self.rows = rows


def context(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Context | None:
    """None for a graph that neither takes nor builds a DTensor or mesh (every other graph's key is unchanged)."""
    if _dtensor_class() is None and _mesh_class() is None:
        return None
    takes = any(is_dtensor(x) or is_mesh(x) for x in example_inputs)
    builds = any(
        is_dtensor(v) or is_mesh(v)
        for module in gm.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
        for v in (node.meta.get("example_value"),)
    )
    if not takes and not builds:
        return None
    coordinate = any(_unevenly_sharded(x) for x in example_inputs if is_dtensor(x)) or _has_random_op(gm)
    return Context(coordinate, _dispatch_rows())


def mesh_text(mesh: Any, coordinate: bool) -> str:
    """A mesh by layout (the same text on every rank), with this rank's coordinate when `coordinate`."""
    try:
        ranks = tuple(int(r) for r in mesh._flatten_rank_map)
        layout = repr(mesh._layout)
        groups = tuple(str(g) for g in mesh._dim_group_names)
        names = mesh.mesh_dim_names
        threaded = getattr(mesh, "_thread_id", None) is not None
        where = f", coordinate={mesh.get_coordinate()}" if coordinate else ""
        text = (
            f"DeviceMesh({mesh.device_type}{where}, groups={groups}, ranks={ranks}, names={names}, layout={layout}"
            f", threaded={threaded}"
        )
    except (AttributeError, TypeError) as e:  # a torch whose DeviceMesh keeps its layout elsewhere
        raise Bypass("unencodable_value", f"a DeviceMesh whose layout aotcache cannot read: {e!r}") from None
    return text + ")"


def mesh_of_text(x: Any, coordinate: bool) -> str | None:
    """The mesh text of a DeviceMesh, or of a DTensor's mesh; None for any other value."""
    if is_mesh(x):
        return mesh_text(x, coordinate)
    if is_dtensor(x):
        return mesh_text(x._spec.mesh, coordinate)
    return None


def placement_text(p: Any) -> str:
    """A placement by kind and fields; a kind aotcache does not know (one carrying a tensor, e.g. _MaskPartial,
    or a user's) raises Bypass."""
    module = sys.modules.get("torch.distributed.tensor.placement_types")
    t = type(p)
    if module is None or getattr(module, t.__name__, None) is not t:
        raise Bypass("unencodable_value", f"placement of unknown kind {t.__module__}.{t.__qualname__}")
    if t.__name__ == "Shard":
        return f"Shard(dim={int(p.dim)})"
    if t.__name__ == "_StridedShard":
        return f"_StridedShard(dim={int(p.dim)}, split_factor={int(p.split_factor)})"
    if t.__name__ == "Replicate":
        return "Replicate()"
    if t.__name__ == "Partial":
        return f"Partial({str(p.reduce_op)})"
    raise Bypass("unencodable_value", f"placement of unknown kind {t.__module__}.{t.__qualname__}")


def is_placement(x: Any) -> bool:
    module = sys.modules.get("torch.distributed.tensor.placement_types")
    base = getattr(module, "Placement", None) if module is not None else None
    return base is not None and isinstance(x, base)


def dtensor_type(x: Any, coordinate: bool) -> str:
    """The `tensor_type` text of a DTensor input: its spec and whether it is a Parameter. Its local tensor's
    metadata is the rest of the input's TensorMeta."""
    spec = x._spec
    meta = spec.tensor_meta
    if meta is None:
        raise Bypass("tensor_subclass", "a DTensor input without tensor metadata in its spec")
    placements = ", ".join(placement_text(p) for p in spec.placements)
    order = tuple((int(e.tensor_dim), tuple(int(d) for d in e.mesh_dims)) for e in (spec.shard_order or ()))
    kind = "Parameter" if isinstance(x, torch.nn.Parameter) else "Tensor"
    return (
        f"DTensor[{kind}](placements=({placements}), global={meta.dtype}{list(meta.shape)}/{tuple(meta.stride)}"
        f", order={order}, strided_order={bool(spec.use_strided_shard_as_shard_order)}"
        f", mesh={mesh_text(spec.mesh, coordinate)})"
    )


def _unevenly_sharded(x: Any) -> bool:
    spec = x._spec
    shape = tuple(spec.tensor_meta.shape) if spec.tensor_meta is not None else tuple(x.shape)
    sizes = spec.mesh.mesh.shape
    for mesh_dim, p in enumerate(spec.placements):
        if p.is_shard():
            factor = getattr(p, "split_factor", 1)
            if shape[p.dim] % (sizes[mesh_dim] * factor) != 0:
                return True
    return False


def _has_random_op(gm: torch.fx.GraphModule) -> bool:
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op not in ("call_function", "call_method"):
                continue
            name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", str(node.target))
            if any(fragment in name.lower() for fragment in _RANDOM_NAMES):
                return True
    return False


def _dispatch_rows() -> list[str]:
    """DTensor's dispatch state that changes what it decides: implicit replication, and every sharding rule,
    strategy or op handler registered from outside torch, by its code."""
    api = sys.modules.get("torch.distributed.tensor._api")
    dispatcher = getattr(getattr(api, "DTensor", None), "_op_dispatcher", None)
    if dispatcher is None:
        return []
    rows = [f"implicit replication: {bool(dispatcher._allow_implicit_replication)}"]
    propagator = dispatcher.sharding_propagator
    tables = {
        "rule": getattr(propagator, "op_to_rules", {}),
        "strategy": getattr(propagator, "op_strategy_funcs", {}),
        "single-dim strategy": getattr(propagator, "op_single_dim_strategy_funcs", {}),
        "handler": getattr(dispatcher, "_custom_op_handlers", {}),
    }
    for kind, table in tables.items():
        for op, registered in list(table.items()):
            fn = getattr(registered, "func", registered)  # a single-dim strategy's info holds its function
            module = getattr(fn, "__module__", None) or ""
            if module == "torch" or module.startswith("torch."):
                continue
            # The info's other fields (allow_uneven_sharding, ...) change what the strategy allows.
            flags = (
                [
                    f"{f.name}={getattr(registered, f.name)!r}"
                    for f in dataclasses.fields(registered)
                    if f.name != "func"
                ]
                if dataclasses.is_dataclass(registered)
                else []
            )
            try:
                rows.append(" ".join([f"{kind} {op}: {function_digest(fn)}", *flags]))
            except Unhashable as e:
                raise Bypass(
                    "dtensor_dispatch", f"a DTensor {kind} for {op} is code aotcache cannot pin: {e}"
                ) from None
    return sorted(rows)


def patched_method(receiver: Any, name: str) -> str | None:
    """What `DTensor.<name>` is when it is not torch's own (a call_method node on a DTensor names the method;
    AOTAutograd runs whatever it holds); None when it is torch's, else its content."""
    if not is_dtensor(receiver):
        return None
    attr = inspect.getattr_static(type(receiver), name, None)
    if attr is None or attr is inspect.getattr_static(torch.Tensor, name, None):
        return None  # torch.Tensor's, which capture._patched_tensor_method covers
    fn = getattr(attr, "__func__", attr)
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("torch.") and getattr(fn, "__name__", None) == name:
        return None
    try:
        return "function " + function_digest(fn)
    except Unhashable as e:
        raise Bypass("tensor_method_patched", f"DTensor.{name} is replaced by code not pinnable: {e}") from None
