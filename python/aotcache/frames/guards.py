"""Dynamo guards a frame entry can carry. Dynamo refuses to serialize guards on object identity (ID_MATCH,
FUNCTION_MATCH, CLASS_MATCH, MODULE_MATCH, CLOSURE_MATCH): an id means nothing in another process. Before Dynamo
serializes a frame's guards, each of those becomes a content guard: the same check by what the object is (a module
by its name in sys.modules, a function by its module, qualified name and code digest, a class or builtin by its
importable name; content.describe). Any other guard Dynamo cannot serialize (NN_MODULE, DICT_VERSION,
WEAKREF_ALIVE) keeps the frame out of the cache."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import operator
import sys
import traceback
import weakref
from typing import Any

from aotcache.frames import content


class OptimizerStep(content.Unportable):
    """A frame that guards an optimizer by identity: a compiled `optimizer.step`. Dynamo runs the optimizer's
    `_init_group` while it traces the step, so the state tensors (exp_avg, step...) are created by the trace itself
    and installed as globals keyed by their ids, with identity guards on each. A fresh process's first step has no
    state yet: no recorded guard set could match it, and serving one would skip the state's creation. Such a frame
    is not recorded (frames.bypass.optimizer_step); it traces, and its graphs hit the graph cache."""

    code = "optimizer_step"


IDENTITY_GUARDS = ("ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH", "CLOSURE_MATCH")
_IDENTITY = set(IDENTITY_GUARDS)


def portable(builder: Any, guard: Any) -> Any:
    """`guard`, or its content-guard replacement when it guards identity. Raises content.Unportable.

    Beyond the guards Dynamo refuses, BUILTIN_MATCH and any guard built on an identity check (a CONSTANT_MATCH on
    a code object, say) are replaced too: Dynamo serializes them, but rebuilds them in the loading process from the
    object found there, so the identity they test is the loading process's own and always holds (a builtin
    monkeypatched before the call would pass). TYPE_MATCH stays: the type is resolved by its importable name, and
    the code Dynamo inlined from it is checked by its source file."""
    kind = guard.create_fn_name()
    if kind == "EMPTY_NN_MODULE_HOOKS_DICT":
        # With skip_nnmodule_hook_guards (torch's default) Dynamo checks nothing here: in one process, a hook added
        # after the compile is missed (torch documents it unsafe). A frame entry is reused by every later process and
        # by every module whose forward is the same code: it checks the hooks dict is still empty.
        return dataclasses.replace(guard, create_fn=functools.partial(aotcache_length_match, len(builder.get(guard))))
    derived = set(guard.guard_types or ())
    if kind not in IDENTITY_GUARDS and kind != "BUILTIN_MATCH" and (kind == "TYPE_MATCH" or not derived & _IDENTITY):
        return guard
    import torch

    value = builder.get(guard)
    if isinstance(value, torch.optim.Optimizer):
        raise OptimizerStep(f"{guard.name} is a {type(value).__qualname__} guarded by identity")
    description = content.describe(value)
    return dataclasses.replace(
        guard, create_fn=functools.partial(aotcache_content_match, kind, description), guard_types=None
    )


def without_stacks(guard: Any, kept_stacks: dict[tuple, Any]) -> Any:
    """`guard` carrying only the one stack frame Dynamo's messages name.

    Dynamo keeps two stacks on each guard: `stack`, where in Dynamo the guard was made (its traceback object cannot
    be pickled, so a loaded frame never had it), and `user_stack`, the user's code being traced. Its recompile
    reasons and guard logs name one frame of it: the innermost outside Dynamo's own files (get_verbose_code_part).
    Serialized whole, the user stacks are most of a frame's guards (gpt2's decode frame: about 600 stacks), and the
    guard manager built from them keeps them all alive. Only that one frame is kept; the verbose guard log
    (TORCH_LOGS=+guards) of a loaded frame shows it alone. `kept_stacks` (one per frame's guards) shares one
    one-frame stack between the guards made on the same line, as Dynamo's stacks share their frames."""
    user = guard.user_stack
    kept = None
    if user:
        from aotcache.torch_glue.dynamo import uninteresting_files

        skipped = uninteresting_files()
        shown = next((f for f in reversed(user) if f.filename not in skipped), None)
        if shown is not None:
            where = (shown.filename, shown.lineno, shown.name)
            kept = kept_stacks.get(where)
            if kept is None:
                kept = kept_stacks[where] = traceback.StackSummary.from_list([shown])
    if guard.stack is None and not user:
        return guard
    return dataclasses.replace(guard, stack=None, user_stack=kept)


def aotcache_content_match(kind: str, description: tuple, builder: Any, guard: Any) -> None:
    """The guard builder's method for a content guard (called by Dynamo when it rebuilds the guards of a loaded
    frame): a leaf guard on the guarded value that holds when `content.matches` does. An object that matched once
    is remembered, so later calls cost one identity test (the identity Dynamo's own guard would have tested): by a
    weak reference where the object takes one (a model's configuration, a function, a class: the guard does not keep
    it alive), else by a strong one (a dict; a remembered id alone could be reused by another object)."""
    matched: list[Any] = []  # [a callable returning the object matched last, or None once it is gone]

    def check(value: Any) -> bool:
        if matched and matched[0]() is value:
            return True
        if content.matches(description, value):
            try:
                matched[:] = [weakref.ref(value)]
            except TypeError:
                matched[:] = [lambda: value]
            return True
        return False

    what = " ".join(str(part) for part in description[:3])
    parts = [f"aotcache content match ({kind}) of {guard.name}: {what}"]
    if description[0] == "state" and description[1:3] == ("builtins", "dict"):
        # Dynamo's dict guard managers take no leaf guard but its own identity match: a root guard that reads the
        # dict through its source name instead.
        code = _compile_sources((guard.name,))
        scope_globals = builder.runtime_global_scope

        def check_root(f_locals: Any) -> bool:
            try:
                value = eval_sources(code, f_locals, scope_globals)[0]
            except Exception:
                return False
            return check(value)

        builder.guard_manager.root.add_lambda_guard(check_root, parts, guard.user_stack)
        return
    builder.get_guard_manager(guard).add_lambda_guard(check, parts, guard.user_stack)


def aotcache_length_match(length: int, builder: Any, guard: Any) -> None:
    """The guard builder's method of a length guard on a module's hooks dict (format 3 wrote one per empty hook dict;
    format 4 groups those, `grouped_hook_guards`, and keeps this for a dict of another length): the guard manager's
    own C++ leaf for a dict's length, checked without a Python call (it fails on a value that is no dict); a manager
    without that leaf gets the same check as a Python lambda."""
    manager = builder.get_guard_manager(guard)
    parts = [f"aotcache len({guard.name}) == {length}"]
    add_dict_length = getattr(manager, "add_dict_length_check_guard", None)
    if add_dict_length is not None:  # a module's hook dicts are dicts (OrderedDict): anything else fails the guard
        add_dict_length(length, parts, guard.user_stack)
        return
    manager.add_lambda_guard(lambda value: len(value) == length, parts, guard.user_stack)


# Dynamo's hook dict attributes of a module (variables/nn_module.py): it guards each that its trace found empty
# (EMPTY_NN_MODULE_HOOKS_DICT), six per module called.
HOOK_DICTS = frozenset(
    (
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
    )
)


def grouped_hook_guards(carried: list[Any]) -> list[Any]:
    """`carried` with each module's empty-hooks guards (`aotcache_length_match(0)` on a hook dict attribute) made
    one guard on the module (`aotcache_empty_hooks`), in the place of the first. Six guards per module were most of
    a frame's guards (a model of 100 blocks of two modules: 1806 of 3033), each rebuilt on load through Dynamo's
    source walk and, in format 3, checked on every call by a Python lambda; the grouped guard builds its checks
    straight under the module's guard manager (`aotcache_empty_hooks`)."""
    from aotcache.torch_glue.dynamo import AttrSource

    members: dict[str, list[str]] = {}
    out: list[Any] = []
    for guard in carried:
        fn, source = guard.create_fn, guard.originating_source
        if not (
            isinstance(fn, functools.partial)
            and fn.func is aotcache_length_match
            and fn.args == (0,)
            and type(source) is AttrSource
            and source.member in HOOK_DICTS
        ):
            out.append(guard)
            continue
        module = source.base.name
        if module not in members:
            members[module] = []
            out.append((module, guard))  # replaced below, once the module's members are known
        members[module].append(source.member)
    for i, item in enumerate(out):
        if isinstance(item, tuple):
            module, first = item
            out[i] = dataclasses.replace(
                first,
                originating_source=first.originating_source.base,
                create_fn=functools.partial(aotcache_empty_hooks, tuple(sorted(members[module]))),
                _hash=None,
            )
    return out


def aotcache_empty_hooks(members: tuple[str, ...], builder: Any, guard: Any) -> None:
    """The guard builder's method of a module's empty-hooks guard: each hook dict in `members` must be an empty dict
    (what `aotcache_length_match(0)` checked for each) when the served frame first runs in this process
    (`first_call`). After that, as for a frame Dynamo traced itself (`skip_nnmodule_hook_guards`, torch's default),
    a hook registered later is not seen: the same call in a process that traced the frame runs the same code. Per
    call this costs nothing; format 4 checked six hook dicts of every module on every call."""
    code = _compile_sources((guard.name,))
    get = operator.attrgetter(*members)
    single = len(members) == 1
    dict_type = dict

    def check(f_locals: Any, scope_globals: dict[str, Any]) -> bool:
        try:
            values = get(eval_sources(code, f_locals, scope_globals)[0])
        except Exception:
            return False
        for value in (values,) if single else values:
            if value or not isinstance(value, dict_type):
                return False
        return True

    first_call(builder).add(f"{guard.name}: {', '.join(members)} empty", check)


class FirstCall:
    """The checks of a served frame that establish cross-process facts: run on the first call its guard manager
    sees in this process (the call it is served for), never again once they held. What runs per call after that is
    Dynamo's own guards, as for a frame it traced itself (plus the storage partition of the call's own tensor
    inputs, `aotcache_storage_partition`)."""

    def __init__(self, scope_globals: dict[str, Any]) -> None:
        self.scope_globals = scope_globals
        self.checks: list[tuple[str, Any]] = []
        self.held = False

    def add(self, what: str, check: Any) -> None:
        self.checks.append((what, check))

    def __call__(self, f_locals: Any) -> bool:
        if self.held:
            return True
        for _, check in self.checks:
            if not check(f_locals, self.scope_globals):
                return False
        self.held = True
        return True


def first_call(builder: Any) -> FirstCall:
    """The FirstCall of the guard manager `builder` builds, added to its root the first time it is asked for."""
    state = getattr(builder, "_aotcache_first_call", None)
    if state is None:
        state = FirstCall(builder.runtime_global_scope)
        builder._aotcache_first_call = state
        builder.guard_manager.root.add_lambda_guard(
            state, ["aotcache: the checks of the frame's first call in this process (hook dicts, storages)"], None
        )
    return state


def keep_builtins(check_fn_manager: Any, carried: list[Any], output_graph: Any) -> None:
    """Dynamo serializes only the builtins its BUILTIN_MATCH guards read; a content guard on a builtin (one Dynamo
    guarded by FUNCTION_MATCH, say) must find it in the serialized builtins dict too."""
    from aotcache.torch_glue.dynamo import DictGetItemSource, GlobalSource

    name = getattr(output_graph, "name_of_builtins_dict_key_in_fglobals", None)
    if not name:
        return
    for guard in carried:
        source = guard.originating_source
        while source is not None:
            if (
                isinstance(source, DictGetItemSource)
                and isinstance(source.base, GlobalSource)
                and source.base.global_name == name
                and isinstance(source.index, str)
            ):
                check_fn_manager.used_builtin_vars.add(source.index)
            source = getattr(source, "base", None)


# ---- storage sharing between the graph's inputs -------------------------------------------------------------------
# Dynamo guards no storage sharing between inputs (two views of one tensor and two tensors with the same sizes pass
# the same guards: in one session backend="inductor" itself reuses the first call's code), but the graph keys do
# (key schema 2: alias groups), so a fresh trace would find another graph entry. A frame entry therefore carries the
# partition of its graphs' tensor inputs into storage-sharing groups, and a root guard checks it on every call.
def storage_partition_guard(builder: Any, output_graph: Any, f_globals: dict[str, Any]) -> Any:
    """The guard to add to a frame's serialized guards. Raises content.Unportable."""
    import torch

    from aotcache.pipeline import tags
    from aotcache.torch_glue.dynamo import GlobalStateSource, Guard, innermost_fn

    names, values = [], []
    for name in sorted(getattr(output_graph, "installed_globals", ())):
        fn = f_globals.get(name)
        if not name.startswith("__compiled_fn") or not callable(fn):
            continue
        if tags.lookup(innermost_fn(fn)) is None:
            continue  # not a graph entry of aotcache's: the frame is not recorded (graph_not_cached)
        sources = tags.input_sources(innermost_fn(fn))
        if sources is None:
            raise content.Unportable(f"the inputs of graph {name} are not known")
        for source in sources:  # the graph's placeholders (not every tensor Dynamo wrapped: a view's base is not one)
            value = builder.get(source)
            if isinstance(value, torch.Tensor) and source.name not in names:
                names.append(source.name)
                values.append(value)
    signature = partition_signature(values)
    if signature is None:
        raise content.Unportable("a graph input has no storage to compare (a tensor subclass, a sparse tensor)")
    _compile_sources(tuple(names))  # every name must evaluate again on load
    return Guard(GlobalStateSource(), functools.partial(aotcache_storage_partition, tuple(names), signature))


def partition_signature(values: list[Any]) -> list | None:
    """The groups of `values` that share a storage, as sorted index lists with each member's storage offset and
    the storage's size; [] when no two share. None when a value's storage cannot be read. A DTensor shares
    through its local shard, as its graph key says (capture.storage_groups)."""
    import torch

    groups: dict[tuple, list[int]] = {}
    if any(type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter for t in values):
        from aotcache.capture.distributed_tensor import local_tensor

        values = [local_tensor(t) for t in values]
    for i, t in enumerate(values):
        try:
            storage = t.untyped_storage()
            where = (storage.data_ptr(), storage.nbytes(), str(t.device))
        except Exception:
            return None
        groups.setdefault(where, []).append(i)
    shared = []
    for where, members in groups.items():
        if len(members) > 1:
            shared.append([where[1], [[i, values[i].storage_offset()] for i in members]])
    return sorted(shared)


def partition_matches(values: Any, signature: list) -> bool:
    """`partition_signature(values) == signature`, checked on every call of a served frame: the common case (no two
    inputs share a storage, signature []) in one pass over plain tensors, ~0.3 us each (the full signature costs
    ~2 us a tensor: a frame of GPT-2 124M's parameters ~0.4 ms a call). Distinct (address, size) pairs mean distinct
    storages on any device, so the full signature would be [] too; anything else (a pair seen twice, a tensor
    subclass, a storage that cannot be read) takes the full comparison."""
    if not signature:
        plain, parameter = _plain_tensor_types()
        seen = set()
        try:
            for t in values:
                kind = type(t)
                if kind is not plain and kind is not parameter:
                    break
                storage = t.untyped_storage()
                where = (storage.data_ptr(), storage.nbytes())
                if where in seen:
                    break
                seen.add(where)
            else:
                return True
        except Exception:
            pass
    return partition_signature(list(values)) == signature


@functools.cache
def _plain_tensor_types() -> tuple[type, type]:
    import torch

    return torch.Tensor, torch.nn.Parameter


@functools.lru_cache(maxsize=1024)
def _compile_sources(names: tuple[str, ...]) -> Any:
    return compile("(" + "".join(f"{n}," for n in names) + ")", "<aotcache storage partition>", "eval")


def eval_sources(code: Any, f_locals: Any, f_globals: dict[str, Any]) -> tuple:
    """Evaluates compiled source names (`_compile_sources`) on a frame's locals and globals, in the scope Dynamo
    evaluates its own guards' sources in: its guard helpers and the builtins. A source name is not always a plain
    subscript chain: a dict subclass's item reads `dict.__getitem__(d, list(dict.keys(d))[0])`, which an empty
    builtins scope rejected (every frame taking a Hugging Face ModelOutput, T5's and Whisper's generate among them,
    was refused, guards_reject_call)."""
    return eval(code, _source_scope(), {"L": f_locals, "G": f_globals})  # the shared scope is only read


@functools.cache
def _source_scope() -> dict[str, Any]:
    import builtins

    try:
        from aotcache.torch_glue.dynamo import get_closure_vars as _get_closure_vars

        helpers = dict(_get_closure_vars())
    except Exception:  # a torch without it: names that use Dynamo's helpers fail to evaluate (the guard fails)
        helpers = {}
    helpers["__builtins__"] = builtins.__dict__
    return helpers


def aotcache_storage_partition(names: tuple[str, ...], signature: list, builder: Any, guard: Any) -> None:
    """The guard builder's method of the storage-partition guard. Every graph input's storage is compared with the
    recording's on the first call (`first_call`); on every call, only the tensors the call passes (sources that do
    not reach a module's parameters, buffers or submodules, nor the module's globals), as those change from call to
    call. A parameter made to share a storage after the first call is not seen, as Dynamo does not see it in a
    frame it traced itself."""
    code = _compile_sources(names)

    def check_all(f_locals: Any, scope_globals: dict[str, Any]) -> bool:
        try:
            values = eval_sources(code, f_locals, scope_globals)
        except Exception:
            return False
        return partition_matches(values, signature)

    first_call(builder).add(f"storage partition of {len(names)} inputs: {signature}", check_all)
    per_call = [i for i, name in enumerate(names) if _passed_by_the_call(name)]
    if len(per_call) < 2:
        return
    sub_signature = restricted_signature(signature, per_call)
    per_call_code = _compile_sources(tuple(names[i] for i in per_call))
    scope_globals = builder.runtime_global_scope  # the module's own globals, not the serialized copy

    def check(f_locals: Any) -> bool:
        try:
            values = eval_sources(per_call_code, f_locals, scope_globals)
        except Exception:
            return False
        return partition_matches(values, sub_signature)

    builder.guard_manager.root.add_lambda_guard(
        check, [f"aotcache storage partition of the {len(per_call)} tensors the call passes: {sub_signature}"], None
    )


_MODULE_STATE = ("._parameters[", "._buffers[", "._modules[")


def _passed_by_the_call(name: str) -> bool:
    """Whether a source names a tensor the call passes (an argument, an item of one), not a module's state."""
    return name.startswith("L[") and not any(part in name for part in _MODULE_STATE)


def restricted_signature(signature: list, indices: list[int]) -> list:
    """`signature` (partition_signature of a list) as partition_signature gives it for the values at `indices`."""
    where = {old: new for new, old in enumerate(indices)}
    out = []
    for nbytes, members in signature:
        kept = [[where[i], offset] for i, offset in members if i in where]
        if len(kept) > 1:
            out.append([nbytes, kept])
    return sorted(out)


# ---- device meshes of DTensor graphs ---------------------------------------------------------------------------------
# Dynamo guards a DeviceMesh by its layout (OPAQUE_OBJ_GUARD_FN_MATCH) and a DTensor by its spec, not by the process
# groups the mesh's dimensions run on, nor by this rank's coordinate; the compiled code names those groups and, for
# some graphs, depends on the coordinate (capture/distributed_tensor.py), and their graph keys hold both. A frame entry
# installs its graphs by key without keying them again, so it carries each mesh as its graphs' keys saw it, and a
# root guard checks it on every call.
def mesh_guard(builder: Any, output_graph: Any, f_globals: dict[str, Any]) -> Any:
    """The guard to add to a frame's serialized guards when its graphs take DTensors or device meshes; else None."""
    from aotcache.capture import distributed_tensor
    from aotcache.pipeline import tags
    from aotcache.torch_glue.dynamo import GlobalStateSource, Guard, innermost_fn

    names: list[str] = []
    texts: list[str] = []
    for name in sorted(getattr(output_graph, "installed_globals", ())):
        fn = f_globals.get(name)
        if not name.startswith("__compiled_fn") or not callable(fn) or tags.lookup(innermost_fn(fn)) is None:
            continue
        coordinate = tags.mesh_coordinate(innermost_fn(fn))
        for source in tags.input_sources(innermost_fn(fn)) or ():
            text = distributed_tensor.mesh_of_text(builder.get(source), coordinate)
            if text is not None and source.name not in names:
                names.append(source.name)
                texts.append(text)
    if not names:
        return None
    _compile_sources(tuple(names))  # every name must evaluate again on load
    return Guard(GlobalStateSource(), functools.partial(aotcache_meshes, tuple(names), tuple(texts)))


def aotcache_meshes(names: tuple[str, ...], texts: tuple[str, ...], builder: Any, guard: Any) -> None:
    """The guard builder's method of the mesh guard: a root guard over the frame's locals."""
    from aotcache.capture import distributed_tensor

    code = _compile_sources(names)
    scope_globals = builder.runtime_global_scope
    coordinate = tuple("coordinate=" in t for t in texts)

    def check(f_locals: Any) -> bool:
        try:
            values = eval_sources(code, f_locals, scope_globals)
            return all(
                distributed_tensor.mesh_of_text(v, c) == t for v, c, t in zip(values, coordinate, texts, strict=True)
            )
        except Exception:
            return False

    builder.guard_manager.root.add_lambda_guard(check, [f"aotcache device meshes of {len(names)} inputs"], None)


# ---- dimension markings (torch._dynamo.mark_dynamic and friends) ----------------------------------------------------
# Dynamo guards a tensor's markings (DIMENSION_DYNAMIC_MARKING_GUARD: a call's markings must be a subset of the
# compiled ones), but builds that guard from the tensor it serialized, which has lost them: rebuilt as is, the guard
# would say "never marked", and a marked tensor would never hit. The entry carries each guarded tensor's markings;
# they are put back on the serialized tensors before the guards are rebuilt.
MARKING_ATTRS = (
    "_dynamo_dynamic_indices",
    "_dynamo_weak_dynamic_indices",
    "_dynamo_unbacked_indices",
    "_dynamo_strict_unbacked_indices",
    "_dynamo_static_indices",
)


def dimension_markings(builder: Any, sorted_guards: Any) -> dict[str, dict[str, list[int]]]:
    """{source name: {marking attribute: sorted dims}} of every tensor a TENSOR_MATCH guard checks and that is
    marked. Raises content.Unportable for markings with dependent state (unbacked shape ids and bounds)."""
    import torch

    out: dict[str, dict[str, list[int]]] = {}
    for guard in sorted_guards:
        if guard.create_fn_name() != "TENSOR_MATCH":
            continue
        value = builder.get(guard)
        if not isinstance(value, torch.Tensor):
            continue
        if hasattr(value, "_dynamo_shape_ids") or hasattr(value, "_dynamo_unbacked_bounds"):
            raise content.Unportable(f"{guard.name} carries unbacked-dimension state")
        marks = {}
        for attr in MARKING_ATTRS:
            if hasattr(value, attr):
                dims = getattr(value, attr)
                if not all(type(d) is int for d in dims):
                    raise content.Unportable(f"{guard.name}.{attr} holds {dims!r}")
                marks[attr] = sorted(dims)
        if marks:
            out[guard.name] = marks
    return out


def restore_markings(guards_state: Any, markings: dict[str, dict[str, list[int]]]) -> None:
    """Puts `markings` back on the tensors of an unpickled guards state. ValueError when a name does not evaluate to
    a tensor there or a marking is malformed."""
    import torch

    og = guards_state.output_graph
    for name, marks in markings.items():
        try:
            value = eval_sources(_compile_sources((name,)), og.local_scope, og.global_scope)[0]
        except Exception as e:
            raise ValueError(f"marked tensor {name} not in the serialized scope: {e}") from None
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"marked {name} is not a tensor")
        for attr, dims in marks.items():
            if attr not in MARKING_ATTRS or not all(type(d) is int for d in dims):
                raise ValueError(f"bad marking {attr}={dims!r} of {name}")
            setattr(value, attr, set(dims))


# ---- tensors with a gradient no guard reads -------------------------------------------------------------------
def drop_unguarded_grad(pickler: Any, reduced: Any) -> Any:
    """`reduced` (Dynamo's reduction of a guarded tensor) with its `.grad` left out when no guard reads the grad.

    Dynamo's guard pickler writes a tensor with its grad, and a grad outside the guard tree as a placeholder, which
    its unpickler then fails to assign (TypeError: assigned grad expected to be a Tensor or None): every frame
    traced after a backward (a parameter has a grad) would not rebuild its guards. A guard on the grad would put
    the grad in the guard tree, so a grad outside it is never read: None is what the guards would see of it."""
    import torch

    if not (isinstance(reduced, tuple) and len(reduced) == 2 and isinstance(reduced[1], tuple) and reduced[1]):
        return reduced
    unpickle = getattr(type(pickler), "_unpickle_tensor", None)
    func, args = reduced
    if unpickle is None or func != unpickle:
        return reduced
    grad = args[-1]
    if isinstance(grad, torch.Tensor) and id(grad) not in pickler.guard_tree_values:
        return func, (*args[:-1], None)
    return reduced


# ---- named constants an unguarded attribute shares with the guarded tensors -----------------------------------------
def keep_named_constant(pickler: Any, obj: Any) -> None:
    """Takes `obj` out of Dynamo's placeholder set when it is a constant pickled by its name (a dtype).

    Dynamo's guard pickler writes a module's unguarded, non-callable attributes as placeholders (`_Missing`), marked
    by id for the whole pickle. A dtype is one object per process: a module holding `self._dtype = torch.float32`
    (Lightning's device/dtype mixin on every LightningModule) made every float32 in the pickle a placeholder, the
    guarded tensors' meta dtypes included, and no guarded tensor rebuilt on load (`empty_strided(): argument 'dtype'
    must be torch.dtype, not _Missing`: the frame bypassed `guards_unloadable`). Written by name it loses nothing
    and costs a few bytes."""
    missing = getattr(pickler, "missing_values", None)
    if missing and type(obj) in _named_constant_types():
        missing.pop(id(obj), None)


@functools.cache
def _named_constant_types() -> tuple[type, ...]:
    import torch

    return (torch.dtype, torch.memory_format, torch.qscheme, torch.layout)


# ---- functions Dynamo's pickler cannot name -------------------------------------------------------------------
# Dynamo pickles a function by its module and qualified name, and serializes it as a placeholder (_Missing) when that
# name gives another object: the undecorated function under a decorator that uses functools.wraps (Hugging Face's
# `can_return_tuple` wraps every model's forward, and the wrapper's frame holds the original in its closure). The
# guards read it (its defaults' length), so the frame's guards would not rebuild. Such a function is named by the
# decorated one's name and the number of `__wrapped__` steps to it, and checked by its code digest on load.
MAX_WRAPPED_DEPTH = 8


def reduce_wrapped_function(obj: Any) -> tuple | None:
    """A pickle reduction of `obj` when it is a function reached from its importable name through `__wrapped__`;
    None when Dynamo names it itself or it is not such a function."""
    if not inspect.isfunction(obj) or "<locals>" in obj.__qualname__:
        return None
    found: Any = sys.modules.get(obj.__module__)
    if found is None:
        return None
    for part in obj.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is obj or found is None:
        return None
    for depth in range(1, MAX_WRAPPED_DEPTH + 1):
        found = getattr(found, "__wrapped__", None)
        if found is None:
            return None
        if found is obj:
            digest = content.code_digest(obj.__code__)
            return unpickle_wrapped_function, (obj.__module__, obj.__qualname__, depth, digest)
    return None


def reduce_fsdp_module(obj: Any, reduced: Any) -> Any:
    """`reduced` (Dynamo's reduction of `obj`), or, for a module FSDP2's `fully_shard` sharded, a reduction that
    rebuilds an instance of its FSDP class. The default one calls the class, and `FSDPModule.__new__` builds an
    instance of the original class instead: the rebuilt guards then expect `Block` where the call has `FSDPBlock`,
    and reject it. The FSDP class itself is pickled by Dynamo (by the class it was made for)."""
    import torch

    if reduced is not NotImplemented or not isinstance(obj, torch.nn.Module):
        return reduced
    fsdp = sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
    made = getattr(fsdp, "cls_to_fsdp_cls", None) if fsdp is not None else None
    if not isinstance(made, dict) or type(obj) not in made.values():
        return reduced
    default = obj.__reduce_ex__(4)
    if not (isinstance(default, tuple) and len(default) >= 2 and default[1] == (type(obj),)):
        return reduced
    return (new_instance_of, (type(obj),), *default[2:])


def new_instance_of(cls: type) -> Any:
    """An instance of `cls` made without calling it (what pickle's default reduction means), bypassing a `__new__`
    that would build another class."""
    return object.__new__(cls)


def unpickle_wrapped_function(module: str, qualname: str, depth: int, digest: str) -> Any:
    """The function `depth` `__wrapped__` steps under `module.qualname`, if its code has `digest`; else ValueError
    (the guards do not rebuild: the frame is traced)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    for _ in range(depth):
        found = found.__wrapped__
    if not inspect.isfunction(found) or content.code_digest(found.__code__) != digest:
        raise ValueError(f"{module}.{qualname} (unwrapped {depth}x) is not the function recorded")
    return found
