"""Cross-process behaviour of torch.compile(backend="aotcache") on real models."""

from __future__ import annotations

import json
import os

import pytest

from conftest import assert_bitwise_equal, cli, frames_on, graph_keys
from workloads import INDUCTOR_COMPILER_MODULES

pytestmark = pytest.mark.frames_off_too  # runs again with the frame cache off (make test)


def _graph_entries(cache_dir) -> list[dict]:
    """`aotcache ls --json` rows of the graph entries (with frames on, each compiled frame adds a frame entry)."""
    return [e for e in json.loads(cli(cache_dir, "ls", "--json")) if e["kind"] == "graph"]


def test_cross_process_miss_then_hit_training(run_fresh, cache_dir):
    cold = run_fresh("mlp")
    assert (cold.stats["hits"], cold.stats["misses"], cold.stats["bypasses"], cold.stats["errors"]) == (0, 1, 0, 0)
    assert len(cold.log_lines("miss")) == 1
    # torch's own AOTAutograd cache ran only in aotcache's sandbox: it missed and served nothing.
    assert cold.aot_autograd.get("autograd_cache_hit", 0) == 0

    warm = run_fresh("mlp")
    assert (warm.stats["hits"], warm.stats["misses"], warm.stats["bypasses"], warm.stats["errors"]) == (1, 0, 0, 0)
    if frames_on():  # the frame cache served the frame: Dynamo did not trace it, its graph loaded from its entry
        assert [ln for ln in warm.log_lines("frame") if " frame hit " in ln] and not warm.log_lines("hit")
        assert warm.stats["frames"]["hits"] == 1 and warm.stats["frames"]["graphs"] == 1
    else:
        assert len(warm.log_lines("hit")) == 1
    # The hit is ours: AOTAutograd never ran (no trace, no torch cache lookup), Inductor compiled nothing.
    assert warm.aot_autograd == {}
    assert "fxgraph_cache_hit" not in warm.inductor and "fxgraph_cache_miss" not in warm.inductor
    assert warm.stats["saved_seconds"] > 0
    assert warm.stats["bytes_read"] == cold.stats["bytes_written"] > 0
    # Outputs and gradients are bitwise those of the compiling run.
    assert set(cold.tensors) == {"y", "0.weight", "0.bias", "2.weight", "2.bias"}
    assert_bitwise_equal(cold.tensors, warm.tensors)
    # Inductor's vector-ISA probe ran in the first process only; the second answered it from the machine's memo.
    assert cold.stats["isa_probe"].get("probed", 0) > 0 and "remembered" not in cold.stats["isa_probe"]
    assert warm.stats["isa_probe"] == {"remembered": cold.stats["isa_probe"]["probed"]}


def test_another_working_directory_hits_graph_and_frame(run_fresh, tmp_path):
    """A process started in another working directory (Dynamo's debug_dir_root follows it) is served everything the
    first stored: the graph, and with frames on the frame too (the frame key left the path out; it missed before)."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cold = run_fresh("mlp", cwd=first)
    assert (cold.stats["hits"], cold.stats["misses"]) == (0, 1)
    warm = run_fresh("mlp", cwd=second)
    assert (warm.stats["hits"], warm.stats["misses"], warm.stats["bypasses"]) == (1, 0, 0)
    if frames_on():
        assert warm.stats["frames"].get("hits") == 1, warm.stats["frames"]
    assert_bitwise_equal(cold.tensors, warm.tensors)


def test_gpt_training_and_inference_graphs_both_hit(run_fresh):
    """A training step and a no_grad inference call are two graphs; both are cached, neither becomes dynamic. The
    warm process loads them without importing Inductor's compiler (wrapper_loading.py) nor compiling their wrappers
    (wrapper_code.py); with that path off, torch's
    load path imports it and the results are the same."""
    cold = run_fresh("gpt")
    assert (cold.stats["misses"], cold.stats["bypasses"], cold.stats["errors"]) == (2, 0, 0), cold.stdout
    assert cold.compiler_modules == sorted(INDUCTOR_COMPILER_MODULES)
    warm = run_fresh("gpt")
    assert (warm.stats["hits"], warm.stats["misses"], warm.stats["bypasses"]) == (2, 0, 0), warm.stdout
    assert warm.aot_autograd == {}
    assert warm.compiler_modules == []
    # Every wrapper (forward and backward of the step, the inference graph) ran from the entry's compiled code.
    assert warm.stats["wrapper_code"].get("compiled", 0) == 0 and warm.stats["wrapper_code"]["stored"] >= 3, warm.stats
    assert_bitwise_equal(cold.tensors, warm.tensors)
    torch_path = run_fresh("gpt", env={"AOTCACHE_LIGHT_LOAD": "0"})
    assert (torch_path.stats["hits"], torch_path.stats["misses"]) == (2, 0), torch_path.stdout
    assert torch_path.compiler_modules == sorted(INDUCTOR_COMPILER_MODULES)
    assert_bitwise_equal(cold.tensors, torch_path.tensors)


@pytest.mark.parametrize(
    ("variant", "component"),
    [
        (("--batch", "9"), "inputs"),
        (("--dtype", "float64"), "inputs"),
        (("--input-grad",), "inputs"),
        (("--no-grad",), "autograd_state"),
        (("--options", '{"epilogue_fusion": false}'), "config"),
    ],
    ids=["shape", "dtype", "requires_grad", "grad_mode", "backend_options"],
)
def test_changed_input_or_state_misses(run_fresh, cache_dir, variant, component):
    base = run_fresh("mlp")
    assert base.stats["misses"] == 1
    assert base.stats["miss_reasons"] == {"new_graph": 1}
    [base_key] = graph_keys(cache_dir)
    base_file = cache_dir / "entries" / base_key[:2] / f"{base_key}.aotc"
    os.utime(base_file, (1_000_000, 1_000_000))  # long unused
    changed = run_fresh("mlp", *variant)
    assert (changed.stats["hits"], changed.stats["misses"]) == (0, 1)
    # The backend explains the miss against the cached entry of the same graph, in the log and the counters.
    assert changed.stats["miss_reasons"] == {component: 1}
    (line,) = changed.log_lines("miss")
    assert f"differs from a cached entry of the same graph in {component}:" in line, line
    assert json.loads(cli(cache_dir, "stats", "--json"))["counters"][f"miss.{component}"] == 1
    entries = _graph_entries(cache_dir)
    assert len(entries) == 2
    # The miss is explained by exactly the component that changed.
    explained = cli(cache_dir, "explain", entries[0]["key"], entries[1]["key"])
    assert explained.splitlines()[0] == f"{component}:", explained
    cli(cache_dir, "show", entries[0]["key"])
    # Explaining (the backend's miss explanation, `explain`, `show`) does not mark the base entry used for eviction.
    assert base_file.stat().st_mtime == 1_000_000
    # And the changed variant, run again, hits its own entry.
    again = run_fresh("mlp", *variant)
    assert (again.stats["hits"], again.stats["misses"]) == (1, 0)
    assert_bitwise_equal(changed.tensors, again.tensors)


def test_corrupt_entry_is_detected_recompiled_and_replaced(run_fresh, cache_dir):
    cold = run_fresh("mlp")
    (entry,) = _graph_entries(cache_dir)
    path = cache_dir / "entries" / entry["key"][:2] / f"{entry['key']}.aotc"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a bit flip in the payload
    path.write_bytes(bytes(data))

    damaged = run_fresh("mlp")
    assert (damaged.stats["hits"], damaged.stats["misses"], damaged.stats["errors"]) == (0, 1, 1)
    assert damaged.stats["error_kinds"] == {"corrupt_entry": 1}
    assert any("corrupt" in ln for ln in damaged.log), damaged.log
    assert_bitwise_equal(cold.tensors, damaged.tensors)
    assert path.read_bytes() != bytes(data)  # rewritten

    healed = run_fresh("mlp")
    assert (healed.stats["hits"], healed.stats["errors"]) == (1, 0)
    assert_bitwise_equal(cold.tensors, healed.tensors)


def test_truncated_entry_is_a_miss(run_fresh, cache_dir):
    run_fresh("mlp")
    (entry,) = _graph_entries(cache_dir)
    path = cache_dir / "entries" / entry["key"][:2] / f"{entry['key']}.aotc"
    path.write_bytes(path.read_bytes()[:100])
    result = run_fresh("mlp")
    assert (result.stats["misses"], result.stats["errors"]) == (1, 1)
    assert result.stats["error_kinds"] == {"corrupt_entry": 1}


def test_cli_stats_agree_with_process_counters(run_fresh, cache_dir):
    runs = [run_fresh("mlp"), run_fresh("mlp"), run_fresh("mlp", "--batch", "3"), run_fresh("python_function")]
    total = {k: sum(r.stats[k] for r in runs) for k in ("hits", "misses", "bypasses", "errors")}
    assert total == {"hits": 1, "misses": 2, "bypasses": 1, "errors": 0}
    report = json.loads(cli(cache_dir, "stats", "--json"))
    assert {k: report["counters"][k] for k in total} == total
    assert report["counters"]["bypass.python_function"] == 1
    assert len(_graph_entries(cache_dir)) == 2
    assert report["entries"] == len(json.loads(cli(cache_dir, "ls", "--json")))  # and the mlp's frame entry, if on
    assert report["counters"]["bytes_written"] == sum(r.stats["bytes_written"] for r in runs)
    cli(cache_dir, "stats", "--zero")
    assert json.loads(cli(cache_dir, "stats", "--json"))["counters"]["hits"] == 0


def test_python_function_bypasses_with_reason_and_correct_result(run_fresh, cache_dir):
    import torch

    result = run_fresh("python_function")
    assert (result.stats["bypasses"], result.stats["misses"], result.stats["hits"]) == (1, 0, 0)
    assert result.stats["bypass_reasons"] == {"python_function": 1}
    (line,) = result.log_lines("bypass")
    assert "opaque_helper" in line
    torch.manual_seed(0)
    x = torch.randn(4, 4)
    assert torch.allclose(result.tensors["y"], (x * 2).sin())
    assert json.loads(cli(cache_dir, "ls", "--json")) == []


def test_disabled_compiles_without_cache(run_fresh, cache_dir):
    result = run_fresh("mlp", env={"AOTCACHE_DISABLE": "1"})
    assert result.stats["bypass_reasons"] == {"disabled": 1}
    assert not (cache_dir / "entries").exists()


def test_torch_caches_switched_off_by_environment_still_cache_in_aotcache(run_fresh):
    """TORCHINDUCTOR_FX_GRAPH_CACHE=0 / TORCHINDUCTOR_AUTOGRAD_CACHE=0 force torch's switches over config.patch;
    aotcache's sandboxed compile lifts the force (nothing is kept in torch's caches) instead of bypassing."""
    off = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    a = run_fresh("mlp", env=off)
    assert a.stats["misses"] == 1 and a.stats["bypasses"] == 0, a.stats
    b = run_fresh("mlp", env=off)
    assert b.stats["hits"] == 1, b.stats
    assert_bitwise_equal(a.tensors, b.tensors)


def test_unusable_cache_dir_compiles_and_reports_once(run_fresh):
    result = run_fresh("gpt", env={"AOTCACHE_DIR": "/proc/aotcache-cannot-exist"})
    assert result.stats["bypasses"] == 2
    assert result.stats["error_kinds"] == {"store_unavailable": 2}
    warnings = [ln for ln in result.log if "WARNING" in ln and "unusable" in ln]
    assert len(warnings) == 1, result.log


def test_salt_changes_the_key(run_fresh):
    run_fresh("mlp")
    salted = run_fresh("mlp", env={"AOTCACHE_SALT": "experiment-2"})
    assert (salted.stats["hits"], salted.stats["misses"]) == (0, 1)
