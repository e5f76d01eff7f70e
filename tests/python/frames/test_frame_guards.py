"""The guards a frame entry adds to Dynamo's, checked in this process against what they must mean: the storage
partition's per-call check against the full signature it stands for (an oracle over generated input sets), its
restriction to the call's own tensors, the first-call checks (hook dicts, every input's storage), and the hooks-dict
length guard as Dynamo's C++ guard manager runs it."""

from __future__ import annotations

import collections
import functools
import random
import types

import pytest
import torch

from aotcache.frames import guards


def _input_sets(seed: int) -> list[list[torch.Tensor]]:
    """Generated lists of graph inputs: fresh tensors, parameters, views and slices of one storage, tied
    parameters, zero-size tensors (all of one storage address), one tensor twice, a tensor subclass."""
    rng = random.Random(seed)
    base = torch.randn(64)
    param = torch.nn.Parameter(torch.randn(8, 8))
    pool = [
        lambda: torch.randn(rng.randint(1, 6)),
        lambda: torch.nn.Parameter(torch.randn(3)),
        lambda: base[rng.randint(0, 10) : rng.randint(11, 60)],
        lambda: base.view(8, 8),
        lambda: param,
        lambda: param.t(),
        lambda: torch.empty(0),
        lambda: torch.randn(4).as_subclass(_Marked),
    ]
    sets = []
    for _ in range(60):
        values = [rng.choice(pool)() for _ in range(rng.randint(0, 7))]
        if values and rng.random() < 0.2:
            values.append(values[0])
        sets.append(values)
    return sets


class _Marked(torch.Tensor):
    pass


@pytest.mark.parametrize("seed", range(5))
def test_the_per_call_partition_check_is_the_signature_comparison(seed):
    sets = _input_sets(seed)
    signatures = [guards.partition_signature(values) for values in sets]
    assert any(signatures) and any(s == [] for s in signatures)  # both kinds were generated
    for values in sets:
        for signature in signatures:
            if signature is None:
                continue
            expected = guards.partition_signature(values) == signature
            assert guards.partition_matches(values, signature) is expected, (values, signature)


def test_two_distinct_tensors_match_no_sharing_and_a_shared_storage_does_not():
    a, b = torch.randn(3), torch.randn(3)
    view = a[1:]
    assert guards.partition_matches([a, b], []) is True
    assert guards.partition_matches([a, view], []) is False
    assert guards.partition_matches([a, view], guards.partition_signature([a, view])) is True
    assert guards.partition_matches([a, b], guards.partition_signature([a, view])) is False


class _Builder:
    """The two methods of Dynamo's guard builder the guards use: the guard's manager, and its value when loading
    (`value`; without one, `get` fails as it would where the source cannot be read)."""

    def __init__(self, manager, value=None):
        self.manager, self.value = manager, value

    def get_guard_manager(self, guard):
        return self.manager

    def get(self, guard):
        if self.value is None:
            raise KeyError(guard.name)
        return self.value


def test_a_hooks_dict_guard_runs_as_the_guard_managers_own_length_check():
    from torch._C._dynamo.guards import RootGuardManager

    root = RootGuardManager()
    guard = types.SimpleNamespace(name="L['self']._forward_hooks", user_stack=None)
    guards.aotcache_length_match(0, _Builder(root), guard)
    assert root.check({}) and root.check(collections.OrderedDict())
    assert not root.check({"hook": 1})
    assert not root.check([])  # not a dict: the guard fails (a miss), never a false hit


def test_a_manager_without_the_length_leaf_gets_the_same_check_in_python():
    calls = []

    class Manager:
        def add_lambda_guard(self, fn, parts, stack):
            calls.append((fn, parts))

    guard = types.SimpleNamespace(name="L['m']._forward_pre_hooks", user_stack=None)
    guards.aotcache_length_match(0, _Builder(Manager()), guard)
    ((fn, parts),) = calls
    assert fn({}) and not fn({"h": 1})
    assert parts == ["aotcache len(L['m']._forward_pre_hooks) == 0"]


def _hook_guard(base, member, length=0):
    from torch._dynamo.source import AttrSource, LocalSource
    from torch._guards import Guard

    return Guard(AttrSource(LocalSource(base), member), functools.partial(guards.aotcache_length_match, length))


def test_a_modules_hook_dict_guards_become_one_guard_on_the_module_in_the_first_ones_place():
    from torch._dynamo.source import LocalSource
    from torch._guards import Guard

    other = Guard(LocalSource("x"), functools.partial(guards.aotcache_content_match, "ID_MATCH", ("constant", "None")))
    carried = [
        _hook_guard("a", "_forward_hooks"),
        other,
        _hook_guard("b", "_forward_pre_hooks"),
        _hook_guard("a", "_backward_hooks"),
        _hook_guard("a", "_forward_pre_hooks"),
        _hook_guard("c", "_forward_hooks", length=2),  # not an empty-hooks guard: kept as it is
        _hook_guard("c", "weight"),  # not a hook dict: kept
    ]
    out = guards.grouped_hook_guards(carried)
    assert [g.name for g in out] == ["L['a']", "L['x']", "L['b']", "L['c']._forward_hooks", "L['c'].weight"]
    assert out[0].create_fn.func is guards.aotcache_empty_hooks
    assert out[0].create_fn.args == (("_backward_hooks", "_forward_hooks", "_forward_pre_hooks"),)
    assert out[2].create_fn.args == (("_forward_pre_hooks",),)
    assert out[1] is other and out[3] is carried[5] and out[4] is carried[6]


class _LoadBuilder:
    """What Dynamo's guard builder gives a loaded frame's guards: its root manager and the module's globals."""

    def __init__(self):
        from torch._C._dynamo.guards import RootGuardManager

        self.guard_manager = types.SimpleNamespace(root=RootGuardManager())
        self.runtime_global_scope = {}


def test_the_empty_hooks_check_runs_on_the_first_call_only():
    """Every hook dict of the module must be an empty dict on the served frame's first call (a miss otherwise); once
    that call held, a hook registered later is not seen, as in a frame Dynamo traced (skip_nnmodule_hook_guards)."""
    members = ("_forward_hooks", "_forward_pre_hooks")
    for module, ok in [
        (torch.nn.Linear(2, 2), True),
        (types.SimpleNamespace(_forward_hooks={}, _forward_pre_hooks=[]), False),  # not a dict
        (types.SimpleNamespace(_forward_hooks={}), False),  # one missing
    ]:
        builder = _LoadBuilder()
        guards.aotcache_empty_hooks(members, builder, types.SimpleNamespace(name="L['m']", user_stack=None))
        assert len(builder.guard_manager.root.get_leaf_guards()) == 1  # one root check for all modules
        assert builder.guard_manager.root.check({"m": module}) is ok
    hooked = torch.nn.Linear(2, 2)
    hooked.register_forward_pre_hook(lambda m, args: None)
    builder = _LoadBuilder()
    guards.aotcache_empty_hooks(members, builder, types.SimpleNamespace(name="L['m']", user_stack=None))
    guards.aotcache_empty_hooks(("_backward_hooks",), builder, types.SimpleNamespace(name="L['n']", user_stack=None))
    assert len(builder.guard_manager.root.get_leaf_guards()) == 1
    clean = torch.nn.ReLU()
    assert not builder.guard_manager.root.check({"m": hooked, "n": clean})  # a first call with a hook: a miss
    assert builder.guard_manager.root.check({"m": torch.nn.Linear(2, 2), "n": clean})  # the first call that holds
    clean.register_full_backward_hook(lambda m, gi, go: None)
    assert builder.guard_manager.root.check({"m": hooked, "n": clean})  # later calls: Dynamo's guards alone


def test_the_storage_partition_is_checked_in_full_on_the_first_call_and_for_the_calls_tensors_after():
    base = torch.randn(8)
    param = torch.nn.Parameter(torch.randn(4))
    names = ("L['x']", "L['y']", "L['self']._parameters['w']")
    f_locals = {"x": torch.randn(3), "y": torch.randn(3), "self": types.SimpleNamespace(_parameters={"w": param})}
    builder = _LoadBuilder()
    guards.aotcache_storage_partition(names, [], builder, types.SimpleNamespace(name="", user_stack=None))
    root = builder.guard_manager.root
    assert len(root.get_leaf_guards()) == 2  # the first call's checks, and the call's own tensors (x, y)
    aliased_param = {**f_locals, "self": types.SimpleNamespace(_parameters={"w": f_locals["x"]})}
    assert not root.check(aliased_param)  # on the first call, every input
    assert root.check(f_locals)
    assert root.check(aliased_param)  # a parameter made to share later: not seen, as in a traced frame
    assert not root.check({**f_locals, "x": base[:4], "y": base[2:]})  # the call's own tensors: every call
    assert guards._passed_by_the_call("L['kwargs']['past_key_values'].layers[0].keys")
    assert not guards._passed_by_the_call("L['self']._modules['0']._parameters['weight']")
    assert not guards._passed_by_the_call("G['table']")


def test_a_restricted_signature_is_the_signature_of_the_restricted_values():
    for seed in range(3):
        for values in _input_sets(seed):
            if any(type(v) not in (torch.Tensor, torch.nn.Parameter) for v in values):
                continue
            full = guards.partition_signature(values)
            rng = random.Random(len(values) + seed)
            indices = sorted(rng.sample(range(len(values)), rng.randint(0, len(values))))
            expected = guards.partition_signature([values[i] for i in indices])
            assert guards.restricted_signature(full, indices) == expected
