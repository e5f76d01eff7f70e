"""The guards a frame entry adds to Dynamo's, checked in this process against what they must mean: the storage
partition's per-call check against the full signature it stands for (an oracle over generated input sets), and the
hooks-dict length guard as Dynamo's C++ guard manager runs it."""

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


@pytest.mark.parametrize("built", ["cpp leaves", "python check"])
def test_the_empty_hooks_guard_fails_on_any_hook_or_a_non_dict(built):
    from torch._C._dynamo.guards import RootGuardManager

    root = RootGuardManager()
    members = ("_forward_hooks", "_forward_pre_hooks")
    module = torch.nn.Linear(2, 2)
    builder = _Builder(root, value=module if built == "cpp leaves" else None)
    guards.aotcache_empty_hooks(members, builder, types.SimpleNamespace(name="L['m']", user_stack=None))
    if built == "cpp leaves":  # an accessor per hook dict, each with its C++ length leaf; nothing in Python
        assert len(root.get_child_managers()) == 2 and not root.get_leaf_guards()
        assert all(len(child.get_leaf_guards()) == 1 for child in root.get_child_managers())
    else:
        assert not root.get_child_managers() and len(root.get_leaf_guards()) == 1
    assert root.check(module)
    handle = module.register_forward_pre_hook(lambda m, args: None)
    assert not root.check(module)
    handle.remove()
    assert root.check(module)
    module.register_forward_hook(lambda m, args, out: None)
    assert not root.check(module)
    assert not root.check(types.SimpleNamespace(_forward_hooks={}, _forward_pre_hooks=[]))  # no dict
    assert not root.check(types.SimpleNamespace(_forward_hooks={}))  # one missing
    single = RootGuardManager()
    relu = torch.nn.ReLU()
    builder = _Builder(single, value=relu if built == "cpp leaves" else None)
    guards.aotcache_empty_hooks(("_backward_hooks",), builder, types.SimpleNamespace(name="m", user_stack=None))
    assert single.check(torch.nn.ReLU())
    relu.register_full_backward_hook(lambda m, gi, go: None)
    assert not single.check(relu)
