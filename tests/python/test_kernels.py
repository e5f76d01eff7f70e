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
