"""Fingerprints of the frame cache's read set (frames/read_set.py): they change with what decides a trace and with
nothing else, and they are the same in every process."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
import torch

import aotcache
from aotcache.frames import read_set


def fp(value):
    return read_set.Fingerprints().digest(value)


def test_a_function_by_code_defaults_keyword_defaults_and_closure():
    def make(k):
        def act(h, s=2.0, *, t=1.0):
            return h * k * s * t

        return act

    a, b = make(2.0), make(2.0)
    assert fp(a) == fp(b)
    assert fp(make(3.0)) != fp(a)  # closure cell
    b.__defaults__ = (5.0,)
    assert fp(b) != fp(a)
    c = make(2.0)
    c.__kwdefaults__ = {"t": 4.0}
    assert fp(c) != fp(a)
    d = make(2.0)
    d.__code__ = (lambda h, s=2.0, *, t=1.0: h).__code__.replace(co_freevars=("k",))  # noqa: E731
    assert fp(d) != fp(a)


def test_a_class_by_every_method_and_attribute_through_its_mro():
    def build(scale, method):
        class Base(torch.nn.Module):
            def act(self, h):
                return torch.relu(h)

        class Act(Base):
            SCALE = scale

            def forward(self, h):
                return self.act(h) * self.SCALE

        if method is not None:
            Base.act = method
        return Act

    ref = fp(build(2.0, None))
    assert fp(build(2.0, None)) == ref
    assert fp(build(3.0, None)) != ref  # class attribute
    assert fp(build(2.0, lambda self, h: torch.tanh(h))) != ref  # a base class's method patched


def test_torch_module_patched_changes_its_class():
    before = fp(torch.nn.ReLU)
    old = torch.nn.ReLU.forward
    torch.nn.ReLU.forward = lambda self, x: torch.tanh(x)
    try:
        assert fp(torch.nn.ReLU) != before
    finally:
        torch.nn.ReLU.forward = old
    assert fp(torch.nn.ReLU) == before


def test_a_c_method_in_a_class_namespace_by_which_method():
    """torch.Tensor.tanh = torch.Tensor.sigmoid puts a C method descriptor into Tensor's namespace: it was compared
    by its type only, and a frame recorded with tanh was served where tanh meant sigmoid (generated pair, seed 2)."""
    before = fp(torch.Tensor)
    old = torch.Tensor.tanh
    try:
        torch.Tensor.tanh = torch.Tensor.sigmoid
        patched = fp(torch.Tensor)
        torch.Tensor.tanh = old  # the C method itself, now in Tensor's own namespace
        restored = fp(torch.Tensor)
    finally:
        if "tanh" in vars(torch.Tensor):
            del torch.Tensor.tanh
    assert patched != before and patched != restored
    assert fp(torch.Tensor) == before


def test_a_builtin_by_the_c_function_not_the_name():
    relu = fp(torch.relu)
    assert fp(torch._C._VariableFunctions.relu) == relu
    assert fp(torch.sigmoid) != relu
    assert fp(torch.nn.functional.gelu) != fp(torch.nn.functional.silu)
    assert fp(len) != fp(abs)


def test_scalars_containers_partials_and_tensors():
    assert fp(2.0) != fp(2) != fp("2")
    assert fp([1.0, 2.0]) != fp([2.0, 1.0])
    assert fp({"k": 1.0}) != fp({"k": 2.0})
    assert fp(functools.partial(torch.clamp, min=0.0)) != fp(functools.partial(torch.clamp, min=1.0))
    assert fp(torch.zeros(2, 3)) == fp(torch.ones(2, 3))  # values are read at run time
    assert fp(torch.zeros(2, 3)) != fp(torch.zeros(3, 2))


def test_pickling_a_class_does_not_change_it():
    import collections
    import pickle

    class_ = collections.OrderedDict
    ref = fp(read_set.Fingerprints)
    pickle.dumps(read_set.Fingerprints())  # sets __slotnames__ on the class
    assert fp(read_set.Fingerprints) == ref
    assert fp(class_) == fp(class_)


_IN_ANOTHER_PROCESS = """
import sys, torch, transformers
from transformers.models.gpt2 import modeling_gpt2 as m
from aotcache.frames import read_set
values = [type(m.ALL_ATTENTION_FUNCTIONS), m.GPT2LMHeadModel, m.GPT2Attention, torch.nn.Module, torch.Tensor,
          transformers.GPT2Config, torch.relu, torch.compiler.is_compiling, {"a": frozenset({"x", "y", "z"})}]
print(",".join(read_set.Fingerprints().digest(v) for v in values) + "|" + str(read_set.facts()))
"""


def test_the_same_in_every_process():
    """String hashes differ per process (PYTHONHASHSEED): a frozenset's order (abstract methods) once made a class's
    fingerprint differ, and every Hugging Face frame missed warm."""
    out = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([sys.executable, "-c", _IN_ANOTHER_PROCESS], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        out.add(done.stdout.strip().splitlines()[-1])
    assert len(out) == 1, out


def test_the_verifier_leaves_out_names_numbered_per_process():
    """Dynamo names a module global by the module's id() and the compile's number in the process (gpt2:train's
    frames: `___module_collections_<id>_c3`): the verifier counted 2 mismatches on every warm gpt2:train process until
    the id was normalized, and the zoo pairs (hf_gpt2_train after other pairs: `_c18` served, `_c22` traced) until the
    compile number was too. The module's name stays (the global's description names it as well)."""
    from aotcache.frames import verify

    assert verify._normal("___module_collections_139766230838992_c3") == verify._normal(
        "___module_collections_140197154084944_c3"
    )
    assert verify._normal("___module_collections_1_c18") == verify._normal("___module_collections_2_c22")
    assert verify._normal("___module_collections_1_c3") != verify._normal("___module_functools_1_c3")
    # Other globals installed by id have an empty prefix (a zoo sweep's bert pair: `G['_140644341737296_c585'].Tensor`).
    assert verify._normal("G['_140644341737296_c585'].Tensor") == verify._normal("G['_140111808538848_c631'].Tensor")
    assert verify._normal("__builtins_dict___3") == verify._normal("__builtins_dict___17")
    assert verify._normal("lib_K") == "lib_K"


def test_equal_code_in_two_modules_has_each_its_own_source(tmp_path, monkeypatch):
    """Code objects compare equal across files (bytecode, names, constants; not the file): each must be attributed
    to its own module and file digest. A memo keyed by equality gave the second module the first's, so an edit of
    the second's file went unseen (the zoo pairs found it: the same helper text in two pair modules)."""
    import importlib
    import sys

    from aotcache.frames import content

    text = "def act(h, k=2.0):\n    return h * k\n"
    (tmp_path / "eq_code_one.py").write_text(text)
    (tmp_path / "eq_code_two.py").write_text(text + "# another file\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    one, two = importlib.import_module("eq_code_one"), importlib.import_module("eq_code_two")
    try:
        assert one.act.__code__ == two.act.__code__  # what makes an equality-keyed memo wrong
        first, second = content.source_of(one.act.__code__), content.source_of(two.act.__code__)
        assert first[0] == "eq_code_one" and second[0] == "eq_code_two", (first, second)
        assert first[1] != second[1]
    finally:
        sys.modules.pop("eq_code_one", None)
        sys.modules.pop("eq_code_two", None)


def _helper_that_breaks(x):
    h = torch.sin(x)
    torch._dynamo.graph_break()
    return torch.cos(h)


def _calls_helper(x):
    return _helper_that_breaks(x + 1) * 2


@pytest.fixture(autouse=True)
def _settings_restored():
    yield
    from aotcache import settings

    settings.reset()
    torch._dynamo.reset()


def _frame_counters() -> dict:
    return dict(aotcache.stats().get("frames", {}))


def _compile_in_fresh_dynamo(tmp_path) -> dict:
    aotcache.configure(cache_dir=str(tmp_path), frames=True)
    torch._dynamo.reset()
    before = _frame_counters()
    torch.compile(_calls_helper, backend="aotcache")(torch.randn(4))
    after = _frame_counters()
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def test_a_break_in_an_inlined_call_carries_the_rolled_back_reads(tmp_path):
    """The outer frame is traced twice: the first attempt inlines the helper and breaks inside it, the second breaks
    at the call. The recorded candidate carries what the first attempt read (the helper, its globals)."""
    from aotcache.frames import record

    recorded = []
    original = record.persist
    try:
        record.persist = lambda frame, candidate, seconds: recorded.append((frame.code.co_name, candidate))
        _compile_in_fresh_dynamo(tmp_path)
    finally:
        record.persist = original
    outer = [c for name, c in recorded if name == "_calls_helper"]
    assert len(outer) == 1
    rows = outer[0]["rolled_back_reads"]
    # The helper's body was read only by the attempt Dynamo rolled back (the helper itself, read by both, is checked
    # through the final read set).
    assert ["G['torch'].sin", "BUILTIN_MATCH"] in [row[:2] for row in rows], rows
    assert ["G['_helper_that_breaks']", "CLOSURE_MATCH"] in [row[:2] for row in outer[0]["reads"]]
    assert not any("__builtins_dict___" in name for name, _, _ in rows), rows  # named through the view


def test_rolled_back_attempts_it_did_not_see_keep_the_frame_out(tmp_path, monkeypatch):
    """Without the hook on Dynamo's rolled-back attempts (a torch that renamed it), a frame traced after a restart
    is not recorded: nothing would say what decided the break."""
    from torch._dynamo.output_graph import DynamoTracerOutput

    aotcache.configure(cache_dir=str(tmp_path), frames=True)  # installs the hooks
    hook = DynamoTracerOutput._cleanup_output_graph
    monkeypatch.setattr(DynamoTracerOutput, "_cleanup_output_graph", hook._aotcache_replaces)
    delta = _compile_in_fresh_dynamo(tmp_path)
    assert delta.get("bypass.rolled_back_unseen", 0) >= 1, delta
    assert delta.get("recorded", 0) == 2, delta  # the two resume functions, traced without a restart
