"""The light load path (aotcache.wrapper_loading): the record made after a compile binds each wrapper name to the
very object Inductor's import would, a wrapper loaded through it has the namespace torch's loader gives, and
anything it does not cover goes to torch. The cross-process check (a warm hit imports none of Inductor's compiler,
with the same results) is test_end_to_end.test_gpt_training_and_inference_graphs_both_hit."""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
import threading
import types
from pathlib import Path

import pytest
import torch

from aotcache import wrapper_loading
from aotcache.torch_glue import features
from aotcache.torch_glue import inductor as inductor_glue
from aotcache.wrapper_loading import Bindings, ExternKernels


@pytest.fixture(scope="module")
def inductor_loaded():
    """Inductor's compiler imported, as in a process that compiled (its kernel modules register extern kernels)."""
    import torch._inductor.codegen.memory_planning
    import torch._inductor.lowering
    import torch._inductor.select_algorithm

    return torch._inductor.select_algorithm.extern_kernels


def test_record_binds_each_name_to_the_identical_object(inductor_loaded):
    from torch._inductor.codegen import memory_planning

    text = wrapper_loading.recorded_bindings()
    record = json.loads(text)
    assert record["version"] == wrapper_loading.FORMAT_VERSION
    assert {"mm", "addmm", "bmm", "baddbmm", "convolution"} <= set(record["extern_kernels"])
    assert all(path.startswith("torch.") for path in record["extern_kernels"].values())
    bound = Bindings.decode(text).values
    for name in record["extern_kernels"]:
        assert getattr(bound["extern_kernels"], name) is getattr(inductor_loaded, name), name
    assert bound["align"] is memory_planning._align
    # Kernels that are Python functions of Inductor's (no torch path) are not recorded: they resolve through the
    # fallback, to the same object.
    assert "bias_addmm" not in record["extern_kernels"]
    assert bound["extern_kernels"].bias_addmm is inductor_loaded.bias_addmm


GOLDEN = (
    '{"align":"torch._inductor.utils._align","extern_kernels":{"_linear_pointwise":"torch.ops.mkldnn._linear_pointwise",'
    '"addmm":"torch.addmm","bmm":"torch.bmm","convolution":"torch.convolution","mm":"torch.mm","mm_dtype":"torch.mm"},'
    '"version":1}'
)


def test_golden_record():
    """docs/formats/wrapper-bindings.md §4."""
    bound = Bindings.decode(GOLDEN).values
    kernels = bound["extern_kernels"]
    assert vars(kernels) == {
        "_linear_pointwise": torch.ops.mkldnn._linear_pointwise,
        "addmm": torch.addmm,
        "bmm": torch.bmm,
        "convolution": torch.convolution,
        "mm": torch.mm,
        "mm_dtype": torch.mm,
    }
    assert kernels.mm is torch.mm and kernels._linear_pointwise is torch.ops.mkldnn._linear_pointwise
    assert bound["align"] is torch._inductor.utils._align


def test_record_is_canonical(inductor_loaded):
    text = wrapper_loading.recorded_bindings()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_no_record_without_inductor_loaded(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch._inductor.select_algorithm", raising=False)
    assert wrapper_loading.recorded_bindings() is None


@pytest.mark.parametrize(
    "text",
    [
        None,
        "not json",
        '{"version": 999, "extern_kernels": {}}',
        '{"version": 1, "extern_kernels": {"mm": "os.system"}}',
        '{"version": 1, "extern_kernels": {"mm": "torch.no_such_kernel"}}',
        '{"version": 1, "extern_kernels": {"mm": "torch.__class__.__init__"}}',
    ],
    ids=["missing", "not_json", "unknown_version", "not_torch", "unresolvable", "dunder"],
)
def test_unusable_record_means_torch_path(text):
    assert Bindings.decode(text) is None


def test_unknown_kernel_name_is_looked_up_in_inductor(inductor_loaded):
    kernels = ExternKernels(mm=torch.mm)
    assert kernels.mm is torch.mm
    assert kernels.conv1x1_via_mm is inductor_loaded.conv1x1_via_mm
    with pytest.raises(AttributeError):
        kernels.no_such_kernel  # noqa: B018


_SOURCE = '''r"""
from torch._inductor.select_algorithm import extern_kernels
"""
import torch
from torch._inductor.select_algorithm import extern_kernels
from torch._inductor.codegen.memory_planning import _align as align


def call(x):
    from torch._inductor.select_algorithm import extern_kernels as nested
    return extern_kernels.mm(x, x), align(13), nested is extern_kernels
'''


def test_rewrite_drops_only_top_level_imports(inductor_loaded):
    bindings = Bindings({"extern_kernels": ExternKernels(mm=torch.mm), "align": lambda n: n + 1})
    code, prebound = bindings.rewrite(_SOURCE, "<wrapper>")
    assert {n for n in prebound if not n.startswith("__aotcache_import_")} == {"extern_kernels", "align"}
    namespace = dict(prebound)
    exec(code, namespace)
    assert not [n for n in namespace if n.startswith("__aotcache_import_")]  # the markers removed themselves
    # The docstring's copy of an import line, exactly as the real one reads, is text, kept as it was.
    assert "from torch._inductor.select_algorithm import extern_kernels" in namespace["__doc__"]
    x = torch.ones(2, 2)
    product, aligned, same = namespace["call"](x)
    assert torch.equal(product, x @ x) and aligned == 14
    assert not same  # the nested import still imports Inductor's namespace
    # Line numbers are kept (a traceback points into the file on disk).
    assert namespace["call"].__code__.co_firstlineno == _SOURCE.splitlines().index("def call(x):") + 1


def test_rewrite_allocates_no_syntax_tree(inductor_loaded):
    """The rewrite compiles text: a large wrapper's load sets off no garbage collection of its own (an AST of it did,
    and with it, once in a while, a full collection of the heap in a warm start's first call)."""
    import gc

    # A wrapper's shape: kernels as long string literals, one `call` of many statements.
    kernels = "".join(
        f"k{i} = async_compile(r'''\n" + "    out[i] = in[i] * 2.0f;\n" * 200 + "''')\n" for i in range(20)
    )
    call = "def call(args):\n" + "".join(f"    buf{i} = extern_kernels.mm(args[0], args[1])\n" for i in range(3000))
    source = _SOURCE + kernels + call
    bindings = Bindings({"extern_kernels": ExternKernels(mm=torch.mm), "align": lambda n: n + 1})
    gc.collect()
    before = gc.get_stats()[0]["collections"]
    assert bindings.rewrite(source, "<wrapper>") is not None
    assert gc.get_stats()[0]["collections"] == before


def test_rewrite_without_covered_imports_is_left_to_torch():
    assert (
        Bindings({"align": max}).rewrite(
            "import torch\nfrom torch._inductor.select_algorithm import extern_kernels\n", "<w>"
        )
        is None
    )
    assert Bindings({"extern_kernels": ExternKernels()}).rewrite("import torch\n", "<w>") is None


def _imported_names(source: str) -> set[str]:
    names = set()
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return names


def test_wrapper_namespace_equals_torch_loaders(tmp_path, monkeypatch, inductor_loaded):
    """Real wrappers (a forward and a backward with mm, addmm, bmm and a convolution), loaded by torch's loader
    and through the record: the same names; every imported name bound to the identical object (each kernel the
    wrapper calls through extern_kernels included); every other name of the same kind."""
    from torch._inductor import codecache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()

    def step(conv, weight, x, y):
        h = torch.nn.functional.conv2d(x, conv).flatten(1)
        return torch.bmm(y, y.transpose(1, 2)).sum() + (h @ weight).relu().sum() + torch.addmm(h, h, h.T).sum()

    conv = torch.randn(4, 3, 3, 3, requires_grad=True)
    weight = torch.randn(16, 8, requires_grad=True)
    x, y = torch.randn(16, 3, 4, 4), torch.randn(2, 3, 5)
    torch.compile(step, backend="inductor")(conv, weight, x, y).backward()
    paths = {m.__file__ for m in codecache.PyCodeCache.modules if m.__file__.startswith(str(tmp_path))}
    assert len(paths) >= 2  # forward and backward

    bindings = Bindings.decode(wrapper_loading.recorded_bindings())
    assert wrapper_loading._install()
    reload = codecache._reload_python_module
    seen_kernels = set()
    for path in sorted(paths):
        source = Path(path).read_text()
        theirs = reload.__wrapped__("theirs", path, set_sys_modules=False)
        with wrapper_loading.loading(bindings):
            ours = reload("ours", path, set_sys_modules=False)
        assert ours.__dict__.keys() == theirs.__dict__.keys()
        assert isinstance(ours.extern_kernels, ExternKernels)
        for name in _imported_names(source) - {"extern_kernels"}:
            assert ours.__dict__[name] is theirs.__dict__[name], name
        used = set(re.findall(r"\bextern_kernels\.(\w+)", source))
        for kernel in used:
            assert getattr(ours.extern_kernels, kernel) is getattr(theirs.extern_kernels, kernel), kernel
        seen_kernels |= used & set(vars(ours.extern_kernels))  # bound from the record, not looked up in Inductor
        for name in ours.__dict__.keys() - _imported_names(source) - {"__builtins__"}:
            # Objects the module makes (its call function, kernels, a Runner of its own class): alike, not identical.
            assert type(ours.__dict__[name]).__qualname__ == type(theirs.__dict__[name]).__qualname__, name
    assert {"mm", "addmm", "bmm", "convolution"} <= seen_kernels


def test_outside_loading_and_on_other_threads_torch_loads(tmp_path, inductor_loaded):
    from torch._inductor import codecache

    path = tmp_path / "wrapper.py"
    path.write_text("from torch._inductor.select_algorithm import extern_kernels\n")
    assert wrapper_loading._install()
    bindings = Bindings({"extern_kernels": ExternKernels(mm=torch.mm)})
    assert codecache._reload_python_module("a", str(path), set_sys_modules=False).extern_kernels is inductor_loaded
    on_thread = []
    with wrapper_loading.loading(bindings):
        assert (
            codecache._reload_python_module("b", str(path), set_sys_modules=False).extern_kernels is not inductor_loaded
        )
        thread = threading.Thread(
            target=lambda: on_thread.append(codecache._reload_python_module("c", str(path), set_sys_modules=False))
        )
        thread.start()
        thread.join()
    assert on_thread[0].extern_kernels is inductor_loaded


def test_replaced_torch_functions_read_what_they_were_checked_against():
    """The pin: the installed torch's three replaced functions read exactly the global names the pass-throughs were
    written against (a torch that changes them turns the light path off, next test)."""
    assert wrapper_loading._install()
    assert inductor_glue.differing_light_load_functions() == []


def test_a_torch_function_of_another_shape_keeps_torchs_path(monkeypatch, caplog):
    from torch._inductor import codecache, output_code

    monkeypatch.setattr(wrapper_loading, "_installed", None)
    monkeypatch.setattr(features, "_resolved", {})  # probed afresh, restored after
    monkeypatch.setattr(features, "_reasons", {})
    monkeypatch.setattr(codecache, "_reload_python_module", codecache._reload_python_module)
    monkeypatch.setattr(codecache.FxGraphCache, "cache_hit_post_compile", codecache.FxGraphCache.cache_hit_post_compile)
    monkeypatch.setattr(output_code.CompiledFxGraph, "__call__", output_code.CompiledFxGraph.__call__)
    names = dict(inductor_glue.LIGHT_LOAD_READS)
    names["CompiledFxGraph.__call__"] = names["CompiledFxGraph.__call__"] - {"RECORD_GRAPH_EXECUTION"}
    monkeypatch.setattr(inductor_glue, "LIGHT_LOAD_READS", names)
    before = (codecache._reload_python_module, output_code.CompiledFxGraph.__call__)
    with caplog.at_level("DEBUG", logger="aotcache"):
        assert not wrapper_loading._install()
    assert "CompiledFxGraph.__call__" in caplog.text
    assert (codecache._reload_python_module, output_code.CompiledFxGraph.__call__) == before
    with wrapper_loading.loading(Bindings({})):
        assert wrapper_loading._current() is None  # loads inside go through torch's path


class _Graph:
    """What a compiled graph's call reads."""

    def __init__(self, run):
        self.current_callable = run
        self._compile_context = None


@pytest.fixture
def light_call(monkeypatch):
    """(the pass-through over a recording stand-in for torch's __call__, its calls, the runtime metrics finishes),
    with `torch._inductor.debug` not imported."""
    import torch._dynamo.utils

    finished, torch_calls = [], []
    monkeypatch.setattr(
        torch._dynamo.utils,
        "get_runtime_metrics_context",
        lambda: types.SimpleNamespace(finish=lambda: finished.append(1)),
    )
    call = wrapper_loading._call_with(lambda graph, inputs: torch_calls.append(inputs) or "torch's")
    monkeypatch.delitem(sys.modules, "torch._inductor.debug", raising=False)
    return call, torch_calls, finished


def test_call_without_the_debug_module_runs_the_graph(light_call):
    call, torch_calls, finished = light_call
    assert call(_Graph(lambda inputs: ("ran", list(inputs))), [1, 2]) == ("ran", [1, 2])
    assert (torch_calls, finished) == ([], [1])

    def fails(inputs):
        raise ValueError("in the graph")

    with pytest.raises(ValueError, match="in the graph"):
        call(_Graph(fails), [])
    assert finished == [1, 1]  # finished also when the graph raises, as torch's


def test_call_goes_to_torch_when_more_of_it_applies(light_call, monkeypatch):
    from torch._inductor.runtime.autotune_cache import AutotuneCacheBundler

    call, torch_calls, finished = light_call
    assert call(_Graph(None), ["no callable"]) == "torch's"
    with torch.autograd.profiler.profile():
        assert call(_Graph(lambda inputs: "ran"), ["profiler"]) == "torch's"
    with monkeypatch.context() as m:
        m.setattr(AutotuneCacheBundler, "has_active_compile", classmethod(lambda cls, context: True))
        assert call(_Graph(lambda inputs: "ran"), ["bundler"]) == "torch's"
    importlib.import_module("torch._inductor.debug")  # the recording switch can be on now
    assert call(_Graph(lambda inputs: "ran"), ["debug"]) == "torch's"
    assert torch_calls == [["no callable"], ["profiler"], ["bundler"], ["debug"]]
    assert finished == []


def test_graph_execution_recording_still_records(tmp_path, monkeypatch, inductor_loaded):
    """A real compiled graph called through the installed pass-through, under torch's graph execution recording:
    recorded as torch records it."""
    import torch._inductor.debug as debug
    from torch._inductor import output_code

    assert wrapper_loading._install()
    assert output_code.CompiledFxGraph.__call__._aotcache_replaces is not None
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    fn = torch.compile(lambda x: (x * 2).sin(), backend="inductor")
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), (x * 2).sin())
    with debug.record_and_log_graph_execution_order():
        fn(x)
        fn(x)
        recorded = list(debug.GRAPH_EXECUTION_ORDER)
    assert len(recorded) == 2


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return (self.fc(x).relu() * 2).sum()


def test_lazy_decompositions_swap_the_pickled_reference_in_place(tmp_path, monkeypatch, inductor_loaded):
    """A real payload (forward and backward graphs): its reference to torch's `select_decomp_table` is swapped for
    the stand-in only inside `loading()` and while torch's module is not imported; the swapped payload is the same
    length, well-formed, loads graphs that hold the stand-in, which gives torch's table, and computes the same."""
    import gc
    import pickletools

    from torch._inductor.decomposition import select_decomp_table

    from aotcache import compiler, decomposition_lazily

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch.manual_seed(0)
    model, x = _Mlp(), torch.randn(3, 8)
    captured = []

    def backend(gm, example_inputs):
        compiled, payload = compiler.compile_serializable(gm, example_inputs, {})
        captured.append((list(example_inputs), compiled, payload))
        return compiled

    torch._dynamo.reset()
    torch.compile(model, backend=backend)(x).backward()
    ((inputs, compiled, payload),) = captured
    torchs, lazy_ref = wrapper_loading._TORCH_DECOMPOSITIONS, wrapper_loading._LAZY_DECOMPOSITIONS
    assert len(torchs) == len(lazy_ref)
    assert payload.count(torchs) >= 1  # this torch pickles the reference as the swap expects

    bindings = Bindings({})
    assert wrapper_loading.lazy_decompositions(payload) is payload  # outside loading()
    with wrapper_loading.loading(bindings):
        assert wrapper_loading.lazy_decompositions(payload) is payload  # torch's module is imported here
    monkeypatch.setattr(wrapper_loading, "_DECOMPOSITION_MODULE", "torch._inductor.decomposition (not imported)")
    with wrapper_loading.loading(bindings):
        lazy = wrapper_loading.lazy_decompositions(payload)
    assert len(lazy) == len(payload) and torchs not in lazy and lazy.count(lazy_ref) == payload.count(torchs)
    assert sum(1 for _ in pickletools.genops(lazy)) == sum(1 for _ in pickletools.genops(payload))

    loaded = compiler.load_serialized(lazy)
    stand_in = decomposition_lazily.select_decomp_table
    holders = [r for r in gc.get_referrers(stand_in) if isinstance(r, dict) and r.get("get_decomp_fn") is stand_in]
    assert len(holders) >= 1
    assert stand_in() == select_decomp_table()
    with torch.no_grad():
        assert torch.equal(loaded(*inputs)[0], compiled(*inputs)[0])


def test_golden_decomposition_references():
    """docs/formats/wrapper-bindings.md §4: the bytes swapped, and that pickle writes torch's reference as them."""
    import pickle

    from torch._inductor.decomposition import select_decomp_table

    from aotcache import decomposition_lazily
    from conftest import REPO

    golden = REPO.joinpath("docs", "formats", "wrapper-bindings.md").read_text()
    torchs = re.search(r"torch's: +([0-9a-f]+)", golden).group(1)
    stand_in = re.search(r"stand-in: +([0-9a-f]+)", golden).group(1)
    assert wrapper_loading._TORCH_DECOMPOSITIONS.hex() == torchs
    assert wrapper_loading._LAZY_DECOMPOSITIONS.hex() == stand_in
    assert bytes.fromhex(torchs) in pickle.dumps({"f": select_decomp_table}, protocol=4)
    assert bytes.fromhex(stand_in) in pickle.dumps({"f": decomposition_lazily.select_decomp_table}, protocol=4)


def test_a_torch_that_raises_instead_of_asserting_keeps_the_light_path():
    """torch 2.14 writes `if self.current_callable is None: raise AssertionError(...)` in CompiledFxGraph.__call__
    where 2.13 wrote `assert self.current_callable is not None`: the same check reads one more global name. Built-in
    exception names do not count; any other new name does."""

    # Made from source: pytest rewrites the asserts of a test module's own functions.
    scope: dict = {}
    exec(
        "def asserting(self, inputs):\n"
        "    assert self.current_callable is not None\n"
        "    return self.current_callable(inputs)\n"
        "def raising(self, inputs):\n"
        "    if self.current_callable is None:\n"
        "        raise AssertionError('self.current_callable must not be None')\n"
        "    return self.current_callable(inputs)\n"
        "def profiling(self, inputs):\n"
        "    if self.current_callable is None:\n"
        "        raise AssertionError('self.current_callable must not be None')\n"
        "    return record_function(self.current_callable)(inputs)\n",
        scope,
    )
    asserting, raising, profiling = scope["asserting"], scope["raising"], scope["profiling"]
    checked = {"_reload_python_module": frozenset(), "FxGraphCache.cache_hit_post_compile": frozenset()}
    names = frozenset(asserting.__code__.co_names)
    found = {"_reload_python_module": lambda: None, "FxGraphCache.cache_hit_post_compile": lambda: None}
    pinned = dict(checked, **{"CompiledFxGraph.__call__": names})
    original = inductor_glue.LIGHT_LOAD_READS
    inductor_glue.LIGHT_LOAD_READS = pinned
    try:
        assert inductor_glue.differing_light_load_functions({**found, "CompiledFxGraph.__call__": raising}) == []
        assert inductor_glue.differing_light_load_functions({**found, "CompiledFxGraph.__call__": profiling}) == [
            "CompiledFxGraph.__call__"
        ]
    finally:
        inductor_glue.LIGHT_LOAD_READS = original
