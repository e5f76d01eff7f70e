"""Kernel binaries in entries (python/aotcache/kernels.py), with real compiles in fresh processes: a hit on a machine
whose Inductor cache directory is empty installs the entry's kernels and runs no C++ compiler; another machine's
kernels are never installed; AOTCACHE_KERNELS=0 carries none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aotcache import _core
from conftest import assert_bitwise_equal, cli, graph_keys


def entry_bundle(cache_dir: Path) -> tuple[str, list[tuple[str, int]]] | None:
    store = _core.LocalStore.open(str(cache_dir))
    (key,) = graph_keys(cache_dir)
    kernels = store.get(key).kernels
    return _core.kernel_bundle_contents(kernels) if kernels else None


@pytest.fixture
def compiled(run_fresh, cache_dir, inductor_dir):
    """One compile of the mlp training step into a fresh cache directory: (its result, its bundle)."""
    cold = run_fresh("mlp")
    assert cold.stats["misses"] == 1 and cold.stats["kernels"] == {}, cold.stats
    bundle = entry_bundle(cache_dir)
    assert bundle is not None, "the entry carries no kernels"
    return cold, bundle


def test_entry_carries_the_kernels_the_compile_built(compiled, inductor_dir, cache_dir):
    _, (fingerprint, files) = compiled
    assert json.loads(fingerprint)["cpu"]["flags"]  # states the machine it was built on
    assert len(files) >= 2  # forward and backward kernels of the training step
    for path, size in files:
        assert path.endswith(".so") and (inductor_dir / path).stat().st_size == size
    # `aotcache show` lists them.
    (key,) = graph_keys(cache_dir)
    shown = json.loads(cli(cache_dir, "show", key, "--json"))["kernels"]
    assert [(f["path"], f["bytes"]) for f in shown["files"]] == files and shown["built_on"] == fingerprint
    assert f"kernels        {len(files)} files, {sum(size for _, size in files)} bytes" in cli(cache_dir, "show", key)


def test_hit_on_an_empty_inductor_dir_installs_the_kernels_and_compiles_nothing(compiled, run_fresh, tmp_path):
    cold, (_, files) = compiled
    empty = tmp_path / "fresh-inductor"
    warm = run_fresh("mlp", env={"TORCHINDUCTOR_CACHE_DIR": str(empty)})
    assert (warm.stats["hits"], warm.stats["misses"], warm.stats["errors"]) == (1, 0, 0), warm.stats
    assert warm.stats["kernels"] == {"installed": len(files)}
    # No kernel build, no precompiled header: not one C++ compiler run (the ISA probe is answered by the memo).
    assert warm.cxx_builds == 0, warm.stdout
    for path, _ in files:
        assert (empty / path).is_file()
    assert_bitwise_equal(cold.tensors, warm.tensors)
    # A second process on that machine finds them present.
    again = run_fresh("mlp", env={"TORCHINDUCTOR_CACHE_DIR": str(empty)})
    assert again.stats["kernels"] == {"present": len(files)} and again.cxx_builds == 0


def test_kernels_of_another_machine_are_not_installed(compiled, run_fresh, tmp_path):
    cold, (_, files) = compiled
    empty = tmp_path / "other-inductor"
    other = {"cpu": {"model": "Other CPU", "vendor": "Other", "flags": "sse2"}}
    warm = run_fresh("mlp", env={"TORCHINDUCTOR_CACHE_DIR": str(empty), "AOTCACHE_MACHINE_OVERRIDE": json.dumps(other)})
    assert warm.stats["hits"] == 1 and warm.stats["kernels"] == {"other_machine": 1}, warm.stats
    assert warm.cxx_builds >= len(files)  # Inductor built them here, as without a bundle
    assert_bitwise_equal(cold.tensors, warm.tensors)


def test_switched_off_nothing_is_carried(run_fresh, cache_dir, tmp_path):
    off = {"AOTCACHE_KERNELS": "0"}
    cold = run_fresh("mlp", env=off)
    assert cold.stats["misses"] == 1 and entry_bundle(cache_dir) is None
    warm = run_fresh("mlp", env={**off, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "empty")})
    assert warm.stats["hits"] == 1 and warm.stats["kernels"] == {} and warm.cxx_builds > 0
    assert_bitwise_equal(cold.tensors, warm.tensors)


# ---- in-process: the pass-throughs a load whose kernels are all present takes ------------------------------------
class _Options:
    """Stands in for Inductor's build options: counts how many are made."""

    made = 0

    def __init__(self, vec_isa: str = "", extra_flags: tuple = (), compile_only: bool = False) -> None:
        type(self).made += 1
        self.flags = ["-O3", vec_isa, *extra_flags] + (["-c"] if compile_only else [])
        self.precompiled_header = None


def test_build_options_made_once_per_arguments_inside_a_load_and_copied():
    import threading

    from aotcache import kernels

    _Options.made = 0
    options = kernels._reused_options_with(_Options)
    outside = [options(vec_isa="avx2"), options(vec_isa="avx2")]
    assert _Options.made == 2 and all(isinstance(o, _Options) for o in outside)  # outside a load: torch's own
    with kernels._all_kernels_present():
        first = options(vec_isa="avx2", extra_flags=["-g"])
        first.precompiled_header = "set by Inductor on this kernel's options"
        first.flags.append("changed in place")
        second = options(vec_isa="avx2", extra_flags=["-g"])
        other = options(vec_isa="avx2", compile_only=True)
        in_thread = []
        worker = threading.Thread(target=lambda: in_thread.append(options(vec_isa="avx2", extra_flags=["-g"])))
        worker.start()
        worker.join()
    assert _Options.made == 2 + 1 + 1 + 1  # one per distinct arguments, and the other thread's own
    assert second is not first and second.precompiled_header is None and second.flags == ["-O3", "avx2", "-g"]
    assert other.flags == ["-O3", "avx2", "-c"] and in_thread[0].flags == ["-O3", "avx2", "-g"]
    options(vec_isa="avx2")
    assert _Options.made == 6  # the load is over


def test_inductors_real_build_options_copied_give_the_same_command_line():
    """The copy of Inductor's own options builds the command line a freshly made one does (its kernel path hashes
    it), and setting the copy's precompiled header leaves the one kept untouched."""
    from torch._inductor import codecache
    from torch._inductor.cpp_builder import CppBuilder

    from aotcache import kernels

    real = getattr(codecache.CppTorchDeviceOptions, "_aotcache_replaces", codecache.CppTorchDeviceOptions)
    options = kernels._reused_options_with(real)
    kwargs = {"vec_isa": codecache.pick_vec_isa(), "include_pytorch": True, "shared": True, "device_type": "cpu"}

    def line(o) -> str:
        return CppBuilder(name="o", sources="i", BuildOption=o).get_command_line()

    with kernels._all_kernels_present():
        kept = options(**kwargs)
        kept.precompiled_header = "/elsewhere/header.h"
        copy = options(**kwargs)
    assert copy.precompiled_header is None and line(copy) == line(real(**kwargs))


def test_precompiled_header_replaced_by_a_plain_one_inside_a_load_only(tmp_path, monkeypatch):
    from aotcache import kernels

    monkeypatch.setattr(kernels, "_inductor_dir", lambda: str(tmp_path))
    asked = []
    header = kernels._plain_header_with(lambda h, line, **kw: asked.append(h) or "/precompiled.gch")
    assert header("torch/prefix.h", "g++ ...") == "/precompiled.gch" and asked == ["torch/prefix.h"]
    with kernels._all_kernels_present():
        plain = header("torch/prefix.h", "g++ ...", vec_isa="avx2")
    assert asked == ["torch/prefix.h"] and Path(plain).read_text() == "#include <torch/prefix.h>\n"


def test_capture_records_only_its_own_threads_kernel_loads():
    """Two compiles capturing at once on two threads each record their own kernel loads, and none is recorded after
    they end: the hook is installed in Inductor once and records for the thread's innermost capture."""
    import threading

    from torch._inductor.codecache import CppCodeCache

    from aotcache import kernels

    loaded: list[str] = []

    class Inductors:  # stands in for CppCodeCache: a load_async that builds nothing
        @classmethod
        def load_async(cls, source: str) -> str:
            loaded.append(source)
            return f"loader of {source}"

    Inductors.load_async = kernels._recording(Inductors.__dict__["load_async"])
    both_in = threading.Barrier(2)
    caps = {}

    def compile_on_thread(name: str) -> None:
        with kernels.capture() as cap:
            both_in.wait()
            Inductors.load_async(f"{name} kernel")
            both_in.wait()
        caps[name] = cap

    threads = [threading.Thread(target=compile_on_thread, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    Inductors.load_async("after both")
    assert caps["a"].loaders == ["loader of a kernel"] and caps["b"].loaders == ["loader of b kernel"]
    assert sorted(loaded) == ["a kernel", "after both", "b kernel"]
    hook = CppCodeCache.__dict__["load_async"].__func__
    with kernels.capture():
        pass
    assert CppCodeCache.__dict__["load_async"].__func__ is hook  # installed once, never swapped
    assert not hasattr(hook._aotcache_replaces.__func__, "_aotcache_replaces")  # wrapping torch's own
