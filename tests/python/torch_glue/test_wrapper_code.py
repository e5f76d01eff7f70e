"""Compiled wrapper code in graph entries (aotcache.wrapper_code, format 1 in docs/formats/wrapper-bindings.md §5): the
record a compile makes holds the code of exactly the texts the light load compiles, a load runs it (with the real file
name) only for the very same text, and anything unusable is compiled as before. The cross-process check (a warm hit
compiles no wrapper, results equal) is test_end_to_end.test_gpt_training_and_inference_graphs_both_hit."""

from __future__ import annotations

import base64
import json
import marshal
import types
import zlib

import pytest
import torch

import aotcache
from aotcache import wrapper_code, wrapper_loading
from aotcache.wrapper_loading import Bindings

# Format 1's golden vector (docs/formats/wrapper-bindings.md §5): a text, its name in a record, and the record format 1
# wrote for it under Python 3.11 (marshal's bytes are Python's own: only read back under the same bytecode magic).
GOLDEN_TEXT = "def f(x):\n    return x + 1\n\ny = f(41)\n"
GOLDEN_DIGEST = "97fd7af6154eef376204eefe22bd7e2613e47de6024bf30e1cd3912aaaea595c"
GOLDEN_RECORD = (
    '{"python":"a70d0d0a","version":1,"wrappers":{"97fd7af6154eef376204eefe22bd7e2613e47de6024bf30e1cd3912aaaea595c":'
    '"eJx7zIAEmKH0ZyUgMZ0hhaGFIYqBiSGVIYVxGSMDw2pGmMIoxhSmYAZN5mRGJN1MUBM+84B11wB1VQFZQHVMfi9BClcyaDLeYqwoBrEVfgnZJO'
    "aXJCcmZ6QqlBclFhSkFtndYkwrYgdKghQUcwOJBoYb3DwdhZ2mDT6fQVa81AQSfppMYFW3GCuLWIB0EQeIYAMSvzhscvNTSnNS7Yq4YcaoA4kPzIyM"
    'jB+YGBkFPzDACTYGVrYGx4akRtcW1wZGEAQbBABz1TIG"}}'
)


def _stored_count() -> int:
    return aotcache.stats()["wrapper_code"].get("stored", 0)


def test_golden_digest_and_envelope():
    assert wrapper_code.digest(GOLDEN_TEXT) == GOLDEN_DIGEST
    record = json.loads(wrapper_code.encode({GOLDEN_TEXT: wrapper_code.compile_text(GOLDEN_TEXT)}))
    assert list(record) == ["python", "version", "wrappers"]  # canonical: keys sorted
    assert record["version"] == 1 and record["python"] == wrapper_code.MAGIC
    assert list(record["wrappers"]) == [GOLDEN_DIGEST]
    code = marshal.loads(zlib.decompress(base64.b64decode(record["wrappers"][GOLDEN_DIGEST])))
    assert code.co_filename == "<aotcache wrapper>"


@pytest.mark.skipif(wrapper_code.MAGIC != "a70d0d0a", reason="the golden record holds Python 3.11 bytecode")
def test_golden_record_is_read():
    code = wrapper_code.decode(GOLDEN_RECORD).code_for(GOLDEN_TEXT, "/golden.py")
    namespace: dict = {}
    exec(code, namespace)
    assert namespace["y"] == 42 and namespace["f"].__code__.co_filename == "/golden.py"


def test_a_stored_code_runs_under_the_real_file_name():
    table = wrapper_code.decode(wrapper_code.encode({GOLDEN_TEXT: wrapper_code.compile_text(GOLDEN_TEXT)}))
    assert table is not None and len(table) == 1
    code = table.code_for(GOLDEN_TEXT, "/some/where/wrapper.py")
    assert code is not None
    namespace: dict = {}
    exec(code, namespace)
    assert namespace["y"] == 42
    assert code.co_filename == namespace["f"].__code__.co_filename == "/some/where/wrapper.py"


def test_another_text_or_an_unusable_record_is_compiled():
    record = wrapper_code.encode({GOLDEN_TEXT: wrapper_code.compile_text(GOLDEN_TEXT)})
    table = wrapper_code.decode(record)
    assert table.code_for(GOLDEN_TEXT.replace("41", "40"), "w.py") is None  # one character: another text
    parsed = json.loads(record)
    for changed in (
        {**parsed, "version": 2},
        {**parsed, "python": "00000000"},  # another Python's bytecode
        {**parsed, "wrappers": []},
    ):
        assert wrapper_code.decode(json.dumps(changed)) is None
    for bad in (None, 7, "", "not json", "[]"):
        assert wrapper_code.decode(bad) is None
    # A blob that does not unpack, or unpacks to something else than code: that text is compiled.
    for blob in ("!!", base64.b64encode(b"junk").decode(), base64.b64encode(zlib.compress(b"N")).decode()):
        damaged = {**parsed, "wrappers": {wrapper_code.digest(GOLDEN_TEXT): blob}}
        assert wrapper_code.decode(json.dumps(damaged)).code_for(GOLDEN_TEXT, "w.py") is None


_SOURCE = """from torch._inductor.select_algorithm import extern_kernels
from torch._inductor.codegen.memory_planning import _align as align

def call(x):
    return extern_kernels.mm(x, x), align(13)
"""


def test_rewrite_runs_the_stored_code_of_its_text_only():
    import torch._inductor.codegen.memory_planning  # noqa: F401  (the names the record binds)
    import torch._inductor.select_algorithm  # noqa: F401

    bindings = Bindings({"extern_kernels": wrapper_loading.ExternKernels(mm=torch.mm), "align": lambda n: n + 1})
    text, code = bindings.compiled_text(_SOURCE)
    assert "del __aotcache_import_0__" in text and code.co_filename == "<aotcache wrapper>"
    table = wrapper_code.decode(wrapper_code.encode({text: code}))
    before = dict(aotcache.stats()["wrapper_code"])
    stored_code, prebound = bindings.rewrite(_SOURCE, "/w/a.py", table)
    assert stored_code.co_filename == "/w/a.py"
    namespace = dict(prebound)
    exec(stored_code, namespace)
    x = torch.ones(2, 2)
    product, aligned = namespace["call"](x)
    assert torch.equal(product, x @ x) and aligned == 14
    # Another source (one more statement): not in the record, compiled.
    bindings.rewrite(_SOURCE + "z = 1\n", "/w/b.py", table)
    after = aotcache.stats()["wrapper_code"]
    assert after.get("stored", 0) - before.get("stored", 0) == 1
    assert after.get("compiled", 0) - before.get("compiled", 0) == 1


def test_real_wrappers_recorded_in_a_compile_load_from_their_code(tmp_path, monkeypatch):
    """A forward and a backward compiled by Inductor: the sources torch loads during the compile are recorded, the
    record holds each wrapper's rewritten text, and loading each through the light path with it runs the stored
    code: the module has torch's loader's names and computes the same."""
    from torch._inductor import codecache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()

    def step(weight, x):
        return (x @ weight).relu().sum() + torch.addmm(x, x, x.T).sum()

    weight, x = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8)
    with wrapper_loading.recording() as sources:
        torch.compile(step, backend="inductor")(weight, x).backward()
    wrappers = [s for s in sources if "extern_kernels" in s]
    assert len(wrappers) >= 2  # forward and backward
    bindings_record = wrapper_loading.recorded_bindings()
    record = wrapper_loading.recorded_code(sources, bindings_record)
    table = wrapper_code.decode(record)
    assert table is not None and len(table) == len(wrappers)

    paths = {m.__file__ for m in codecache.PyCodeCache.modules if m.__file__.startswith(str(tmp_path))}
    reload = codecache._reload_python_module
    bindings = Bindings.decode(bindings_record)
    before = _stored_count()
    for path in sorted(paths):
        theirs = reload.__wrapped__("theirs", path, set_sys_modules=False)
        with wrapper_loading.loading(bindings, table):
            ours = reload("ours", path, set_sys_modules=False)
        assert ours.__dict__.keys() == theirs.__dict__.keys()
        functions = [getattr(v, "__func__", v) for v in vars(ours).values() if callable(v)]
        own = [f for f in functions if isinstance(f, types.FunctionType) and f.__module__ == ours.__name__]
        assert own and {f.__code__.co_filename for f in own} == {path}  # tracebacks point at the wrapper file
    assert _stored_count() - before == len(paths)
