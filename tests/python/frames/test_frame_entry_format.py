"""The frame entry payload's parts that aotcache encodes itself (docs/formats/frame-entry-format.md §1-§2), in one
process: golden encodings, round trips, and malformed input refused with ValueError (a verified entry that does not
decode is an internal error of the load: the frame traces)."""

from __future__ import annotations

import json

import pytest
import torch
from torch._dynamo import pgo

from aotcache.frames import content, dynamic_state, entry, guards

# States as Dynamo leaves them after tracing a (4, 8) then a (6, 8) tensor, an int 2 then 3, a float 2.5; and a
# stride Dynamo infers from the next dimension.
GOLDEN_STATE = {
    "L['n']": {"excluded_scalar": 2, "excluded_sizes": None, "scalar": "?", "size": "?", "stride": "?"},
    "L['s']": {"excluded_scalar": None, "excluded_sizes": None, "scalar": 2.5, "size": "?", "stride": "?"},
    "L['x']": {"excluded_scalar": None, "excluded_sizes": [4, 8], "scalar": "?", "size": ["?", 8], "stride": [8, 1]},
    "L['y']": {
        "excluded_scalar": None,
        "excluded_sizes": None,
        "scalar": None,
        "size": ["?", 8],
        "stride": [{"infer": 1}, 1],
    },
}


def _entries() -> dict:
    x = pgo.FrameStateSizeEntry.make_tensor((4, 8), (8, 1))
    x |= pgo.FrameStateSizeEntry.make_tensor((6, 8), (8, 1))
    n = pgo.FrameStateSizeEntry.make_scalar(2)
    n |= pgo.FrameStateSizeEntry.make_scalar(3)
    y = pgo.FrameStateSizeEntry(size=(pgo.auto_dynamic, 8), stride=(pgo.InferStride(1), 1))
    return {"L['n']": n, "L['s']": pgo.FrameStateSizeEntry.make_scalar(2.5), "L['x']": x, "L['y']": y}


def test_automatic_dynamic_state_golden_and_round_trip():
    encoded = {name: dynamic_state.encode_entry(e) for name, e in _entries().items()}
    assert json.loads(json.dumps(encoded, sort_keys=True)) == GOLDEN_STATE
    decoded = dynamic_state.decode(json.loads(json.dumps(GOLDEN_STATE)))
    for name, e in _entries().items():
        d = decoded[name]
        assert (d.scalar, d.size, d.stride, d.excluded_sizes, d.excluded_scalar) == (
            e.scalar,
            e.size,
            e.stride,
            e.excluded_sizes,
            e.excluded_scalar,
        ), name


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"L['x']": {"scalar": "dynamic", "size": None, "stride": None}},
        {"L['x']": {"scalar": None, "size": [[1]], "stride": None}},
        {"L['x']": {"scalar": None, "size": None, "stride": [{"infer": "1"}]}},
        {"L['x']": {"scalar": None, "size": None, "stride": None, "excluded_sizes": [1.5]}},
        {"L['x']": {"scalar": None, "size": None}},
    ],
)
def test_malformed_automatic_dynamic_state_is_refused(bad):
    with pytest.raises((ValueError, KeyError)):
        dynamic_state.decode(bad)


def test_merge_joins_like_a_trace():
    """Merging the state recorded for n=2 into a process that then sees n=3 makes n dynamic, as two traces would."""

    def f(x, n):
        return x * n

    code = f.__code__
    state = pgo.get_code_state()[pgo.CodeId.make(code, None)]
    state.automatic_dynamic.clear()
    dynamic_state.merge(code, None, {"L['n']": pgo.FrameStateSizeEntry.make_scalar(2)})
    assert state.automatic_dynamic["L['n']"].scalar == 2
    dynamic_state.merge(code, None, {"L['n']": pgo.FrameStateSizeEntry.make_scalar(3)})
    assert state.automatic_dynamic["L['n']"].scalar is pgo.auto_dynamic
    assert dynamic_state.snapshot(code, None)["L['n']"]["scalar"] == "?"


def test_markings_restored_on_the_serialized_tensors():
    class OG:
        local_scope = {"x": torch.empty(2, 3, device="meta")}
        global_scope: dict = {}

    class State:
        output_graph = OG()

    guards.restore_markings(State(), {"L['x']": {"_dynamo_dynamic_indices": [0, 1]}})
    assert OG.local_scope["x"]._dynamo_dynamic_indices == {0, 1}
    with pytest.raises(ValueError, match="bad marking"):
        guards.restore_markings(State(), {"L['x']": {"_dynamo_something": [0]}})
    with pytest.raises(ValueError, match="not in the serialized scope"):
        guards.restore_markings(State(), {"L['y']": {"_dynamo_dynamic_indices": [0]}})


def test_closure_kinds_split_models_not_values():
    def cell(value):
        return (lambda: value).__closure__[0]

    def cells(*values):
        return tuple(cell(v) for v in values)

    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    wide = torch.nn.Linear(4, 8)
    # Same class and structure: one entry (weights differ; the guards check values).
    assert content.closure_kinds(cells(a)) == content.closure_kinds(cells(b))
    assert content.closure_kinds(cells(a)) != content.closure_kinds(cells(wide))
    assert content.closure_kinds(cells(a)) != content.closure_kinds(cells(torch.nn.Sequential(a)))
    assert content.closure_kinds(cells(1.0)) == content.closure_kinds(cells(2.0)) == ["value builtins.float"]
    assert content.closure_kinds(cells(len)) == ["value builtins.builtin_function_or_method"]
    assert content.closure_kinds(None) == []


def test_payload_keeps_the_newest_candidates():
    candidates = [{"n": i} for i in range(entry.MAX_CANDIDATES + 3)]
    assert entry.decode(entry.encode(candidates)) == candidates[3:]
    with pytest.raises(ValueError):
        entry.decode(b'{"format": 1, "candidates": []}')  # format 1 had no read set: never served
    with pytest.raises(ValueError):
        entry.decode(b'{"format": 2, "candidates": []}')  # format 2 had no rolled-back reads: never served
    with pytest.raises(ValueError):
        entry.decode(b'{"format": 3, "candidates": []}')  # format 3 had a guard per hook dict: traced again
    with pytest.raises(ValueError):
        entry.decode(b'{"format": 4, "candidates": []}')  # format 4 had no process-state facts: traced again
    with pytest.raises(ValueError):
        entry.decode(b'{"format": 5, "candidates": []}')  # format 5 read hook dicts' order with their handle ids
    with pytest.raises(ValueError):
        entry.decode(b'{"format": %d, "candidates": []}' % (entry.FORMAT + 1))  # a newer writer's format


class PlainConfig:
    def __init__(self, width: int, activation: str = "gelu") -> None:
        self.width, self.activation = width, activation


class CustomPickled(PlainConfig):
    def __reduce__(self):
        return (PlainConfig, (1,))


def test_plain_objects_described_by_state():
    """Dynamo guards a model's config object by identity; in another process the same config is one of the same
    class with equal attributes, and nothing else."""
    d = content.describe(PlainConfig(64))
    assert d[0] == "state" and content.matches(d, PlainConfig(64))
    assert not content.matches(d, PlainConfig(65))
    assert not content.matches(d, PlainConfig(64, activation="relu"))
    assert not content.matches(d, CustomPickled(64))
    with pytest.raises(content.Unportable):
        content.describe(CustomPickled(64))  # its pickle does not show its state
    d = content.describe(10**30)  # not interned: another process's equal int is another object
    assert content.matches(d, int("1" + "0" * 30)) and not content.matches(d, 10**30 + 1)
    assert not content.matches(d, float(10**30))
    d = content.describe({"b": 1, "a": [2.5]})
    assert content.matches(d, {"a": [2.5], "b": 1}) and not content.matches(d, {"a": [2.5], "b": 2})


def test_wrapped_function_pickled_by_its_decorated_name():
    reduced = guards.reduce_wrapped_function(_undecorated)
    assert reduced is not None and reduced[1][2] == 1
    assert reduced[0](*reduced[1]) is _undecorated
    assert guards.reduce_wrapped_function(decorated) is None  # importable as it is: Dynamo's own pickling
    module, qualname, depth, _ = reduced[1]
    with pytest.raises(ValueError, match="not the function recorded"):
        guards.unpickle_wrapped_function(module, qualname, depth, "0" * 64)


def _decorate(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def decorated(x):
    return x + 1


_undecorated = decorated
decorated = _decorate(decorated)


def test_unguarded_grad_left_out_of_a_guarded_tensor():
    """Dynamo's pickler writes a guarded parameter with its grad; a grad outside the guard tree became a placeholder
    its unpickler cannot assign. The recording pickler leaves such a grad out, and keeps one a guard reads."""
    import io

    from torch._dynamo.guards import GuardsStatePickler

    p = torch.nn.Parameter(torch.randn(3))
    p.grad = torch.ones(3)
    pickler = GuardsStatePickler({id(p): p}, {}, {}, io.BytesIO())
    reduced = pickler.reducer_override(p)
    assert reduced[1][-1] is p.grad  # Dynamo's reduction carries the grad (pickled as a placeholder, then refused)
    func, args = guards.drop_unguarded_grad(pickler, reduced)
    assert func == reduced[0] and args[-1] is None and args[:-1] == reduced[1][:-1]
    assert func(*args).grad is None  # rebuilds
    pickler.guard_tree_values[id(p.grad)] = p.grad  # a guard reads the grad: kept
    assert guards.drop_unguarded_grad(pickler, reduced) is reduced
    other = (print, ("not a tensor",))
    assert guards.drop_unguarded_grad(pickler, other) is other


class _Manager:
    def __init__(self) -> None:
        self.checks: list = []

    def add_lambda_guard(self, check, parts, user_stack) -> None:
        self.checks.append(check)


def test_content_guard_does_not_keep_the_matched_object_alive():
    """A content guard remembers the object it matched last, for a one-identity-test fast path: weakly, so a model's
    config it guarded is freed with the model, and an object born later at the same address is checked in full."""
    import gc
    import types
    import weakref

    manager = _Manager()
    builder = types.SimpleNamespace(get_guard_manager=lambda guard: manager)
    guard = types.SimpleNamespace(name="L['self'].config", user_stack=None)
    guards.aotcache_content_match("ID_MATCH", content.describe(PlainConfig(64)), builder, guard)
    (check,) = manager.checks
    config = PlainConfig(64)
    assert check(config) and check(config)
    alive = weakref.ref(config)
    del config
    gc.collect()
    assert alive() is None, "the guard kept the object it matched alive"
    assert check(PlainConfig(64)) and not check(PlainConfig(65))
    changed = PlainConfig(64)
    assert check(changed)
    changed.width = 65  # the same object, changed: the fast path answers for the identity, as Dynamo's ID_MATCH
    assert check(changed)


def test_generated_dataclass_init_pinned_through_its_class_with_one_referrer_scan(monkeypatch):
    """A dataclass's generated __init__ (no source file) is pinned as an attribute of its importable class. The class
    is the one dataclasses names the function after: found with one scan of the garbage collector's referrers (each
    walks every object of the process; recording a Hugging Face model's frame inlines several such __init__s)."""
    import gc

    scans = []
    real = gc.get_referrers
    monkeypatch.setattr(gc, "get_referrers", lambda *objs: scans.append(objs) or real(*objs))
    code = pgo.FrameStateSizeEntry.__init__.__code__
    kind, spec = content.source_of(code)
    assert kind == "<attr>"
    module, qualname, attribute, digest = json.loads(spec)
    assert (module, qualname, attribute) == ("torch._dynamo.pgo", "FrameStateSizeEntry", "__init__")
    assert digest == content.code_digest(code) and content._generated_unchanged(spec)
    assert len(scans) == 1

    @__import__("dataclasses").dataclass
    class Local:  # local to this function: no importable class holds its __init__
        a: int

    with pytest.raises(content.Unportable, match="generated and belongs to no importable class"):
        content.source_of(Local.__init__.__code__)


def test_guards_keep_the_one_user_frame_dynamos_messages_name():
    """A recorded guard keeps, of its user stack, only the frame Dynamo's recompile reasons and guard logs name (the
    innermost outside Dynamo's own files): its verbose code part is unchanged. Guards made on one line share one
    kept stack, the traceback-less `stack` is dropped, and a guard without stacks is returned as it is."""
    import traceback

    from torch._dynamo import polyfills
    from torch._dynamo.guards import GuardBuilder, get_verbose_code_part
    from torch._dynamo.source import LocalSource
    from torch._guards import Guard

    def frame(filename: str, lineno: int, name: str) -> traceback.FrameSummary:
        return traceback.FrameSummary(filename, lineno, name, line=f"line {lineno} of {name}")

    def made_at(*frames: traceback.FrameSummary, stack: object = None) -> Guard:
        return Guard(
            LocalSource("x"),
            GuardBuilder.TENSOR_MATCH,
            stack=stack,
            user_stack=traceback.StackSummary.from_list(list(frames)),
        )

    outer, inner = frame("/user/model.py", 10, "forward"), frame("/user/layers.py", 42, "attention")
    dynamo_own = frame(polyfills.__file__, 7, "polyfill")
    first = made_at(outer, inner, dynamo_own, stack=traceback.StackSummary())
    second = made_at(outer, frame("/user/layers.py", 42, "attention"))  # another FrameSummary for the same line
    kept: dict = {}
    slim_first, slim_second = guards.without_stacks(first, kept), guards.without_stacks(second, kept)
    assert [tuple(f)[:3] for f in slim_first.user_stack] == [("/user/layers.py", 42, "attention")]
    assert slim_second.user_stack is slim_first.user_stack and slim_first.stack is None
    for before, after in ((first, slim_first), (second, slim_second)):
        assert "layers.py:42" in get_verbose_code_part("check(x)", after)
        assert get_verbose_code_part("check(x)", after) == get_verbose_code_part("check(x)", before)
    only_dynamo = guards.without_stacks(made_at(dynamo_own), kept)
    assert only_dynamo.user_stack is None
    bare = Guard(LocalSource("x"), GuardBuilder.TENSOR_MATCH)
    assert guards.without_stacks(bare, kept) is bare
