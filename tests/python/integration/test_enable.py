"""torch.compile's default backend through aotcache with no code change (default_backend.py, startup.py,
`aotcache run`): programs that never name aotcache, the Hugging Face Trainer's torch_compile=True and torchrun ranks
get the cache, results bitwise equal to the same program under plain inductor; a torch whose wrapper has another
shape leaves the program on inductor with one WARNING."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SUPPORT, assert_bitwise_equal

pytestmark = pytest.mark.timeout(1500)  # fresh processes: the Trainer, torchrun
HERE = SUPPORT
EXE = Path(sys.executable).parent / "aotcache"


def _env(cache_dir: Path, inductor_dir: Path, **extra: str) -> dict:
    env = dict(os.environ)
    env.pop("AOTCACHE_ENABLE", None)
    env.update({"AOTCACHE_DIR": str(cache_dir), "TORCHINDUCTOR_CACHE_DIR": str(inductor_dir), "HF_HUB_OFFLINE": "1"})
    env.update(extra)
    return env


def _run(argv: list[str], env: dict, timeout: int = 600) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _worker(cases: str, out: Path) -> list[str]:
    return [sys.executable, str(HERE / "enable_worker.py"), cases, str(out)]


def _graphs(stats: dict) -> tuple[int, int]:
    return stats["hits"], stats["misses"]


def test_programs_under_the_launcher_and_the_environment_get_the_cache(tmp_path, inductor_dir):
    """Cold under `aotcache run`, warm with AOTCACHE_ENABLE=1 set by hand, the reference with neither: the warm
    process compiles nothing (every graph hit, every frame served), and every result equals the reference's."""
    cache = tmp_path / "cache"
    cold, warm, ref, off = (tmp_path / f"{n}.pt" for n in ("cold", "warm", "ref", "off"))
    _run(
        [str(EXE), "--dir", str(cache), "run", "--", *_worker("programs", cold)],
        _env(tmp_path / "unused", inductor_dir),
    )
    _run(_worker("programs", warm), _env(cache, inductor_dir, AOTCACHE_ENABLE="1"))
    _run(_worker("programs", ref), _env(cache, tmp_path / "ref-inductor"))
    _run(_worker("programs", off), _env(cache, inductor_dir, AOTCACHE_ENABLE="0"))
    c, w, r, o = (torch.load(p) for p in (cold, warm, ref, off))
    assert_bitwise_equal(c["out"], r["out"])
    assert_bitwise_equal(w["out"], r["out"])
    assert r["stats"] is None and o["stats"] is None  # neither imported aotcache at all
    assert c["routed"] and w["routed"]
    assert not c["backend_imported_at_start"]  # imported at the first torch.compile, not at interpreter start
    hits, misses = _graphs(c["stats"])
    assert misses >= 5 and hits == 0, c["stats"]
    hits, misses = _graphs(w["stats"])
    assert misses == 0 and hits >= 1, w["stats"]
    frames = w["stats"]["frames"]
    # Every frame served but the optimizer step's (frame-cached never: optimizer_step; its graph hits) and the
    # scheduler's (no graph: no_code).
    assert frames.get("hits", 0) >= 5, frames
    assert frames.get("misses", 0) == frames.get("bypasses", 0), frames
    assert set(k for k in frames if k.startswith("bypass.")) <= {"bypass.optimizer_step", "bypass.no_code"}, frames
    assert any(k.startswith("recorded") or k == "recorded" for k in c["stats"]["frames"]), c["stats"]["frames"]
    # mode= and options= compiled their own graphs: more graph entries than the default requests alone.
    entries = subprocess.run([str(EXE), "--dir", str(cache), "ls"], capture_output=True, text=True).stdout
    assert sum(" graph " in line for line in entries.splitlines()) >= 6, entries


def test_the_trainer_with_torch_compile_gets_the_cache(tmp_path, inductor_dir):
    """The Hugging Face Trainer's own `torch_compile=True` (accelerate underneath, backend "inductor"), under
    `aotcache run`: the warm process serves every frame and graph; losses and weights equal plain inductor's."""
    pytest.importorskip("accelerate")
    cache = tmp_path / "cache"
    runs = {n: tmp_path / n / "out.pt" for n in ("cold", "warm", "ref")}
    for p in runs.values():
        p.parent.mkdir()
    for name in ("cold", "warm"):
        _run([str(EXE), "run", *_worker("trainer", runs[name])], _env(cache, inductor_dir))
    _run(_worker("trainer", runs["ref"]), _env(cache, tmp_path / "ref-inductor"))
    c, w, r = (torch.load(p) for p in runs.values())
    assert_bitwise_equal(c["out"], r["out"])
    assert_bitwise_equal(w["out"], r["out"])
    assert _graphs(c["stats"])[1] >= 1
    hits, misses = _graphs(w["stats"])
    assert misses == 0 and hits >= 1, w["stats"]
    frames = w["stats"]["frames"]
    assert frames.get("misses", 0) == 0 and frames.get("hits", 0) >= 1, frames


def test_a_nanogpt_training_script_gets_the_cache(tmp_path, inductor_dir):
    """nanoGPT's loop as users write it (nanogpt_train.py): the compiled model, a compiled AdamW step whose learning
    rate the cosine schedule sets as a Python float every iteration (a symbolic float from the second step on), and
    `generate` with top-k sampling over a growing sequence. Cold under `aotcache run`, warm the same: no bypass in
    either, the warm process compiles nothing, and losses, learning rates, weights and sampled tokens equal plain
    inductor's with torch's own caches off (with them on, torch serves stale float results:
    docs/guide/dynamic-shapes.md)."""
    cache = tmp_path / "cache"
    runs = {n: tmp_path / f"{n}.pt" for n in ("cold", "warm", "ref")}
    script = [sys.executable, str(HERE / "nanogpt_train.py")]
    for name in ("cold", "warm"):
        _run([str(EXE), "--dir", str(cache), "run", "--", *script, str(runs[name])], _env(cache, inductor_dir))
    no_torch_caches = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    # torch's caches off, so the reference may share the kernel directory (a kernel is the same whoever built it)
    _run([*script, str(runs["ref"])], _env(cache, inductor_dir, **no_torch_caches))
    c, w, r = (torch.load(p) for p in runs.values())
    assert_bitwise_equal(c["out"], r["out"])
    assert_bitwise_equal(w["out"], r["out"])
    assert r["stats"] is None
    assert c["stats"]["bypasses"] == 0 and w["stats"]["bypasses"] == 0, (c["stats"], w["stats"])
    hits, misses = _graphs(c["stats"])
    assert misses >= 4, c["stats"]  # the training graph, the step with a constant then a symbolic lr, generate's
    hits, misses = _graphs(w["stats"])
    assert misses == 0 and hits == _graphs(c["stats"])[1], w["stats"]
    frames = w["stats"]["frames"]
    assert frames.get("hits", 0) >= 2, frames
    assert set(k for k in frames if k.startswith("bypass.")) <= {"bypass.optimizer_step", "bypass.no_code"}, frames


def test_torchrun_ranks_get_the_cache(tmp_path, inductor_dir):
    """`aotcache run -- torchrun --nproc_per_node=2 ...`: every rank of the cold job routes through aotcache; every
    rank of the warm job hits."""
    cache = tmp_path / "cache"
    torchrun = str(Path(sys.executable).parent / "torchrun")
    for name in ("cold", "warm"):
        argv = [str(EXE), "--dir", str(cache), "run", "--", torchrun, "--standalone", "--nproc_per_node=2"]
        _run(argv + [str(HERE / "enable_worker.py"), "rank", str(tmp_path / name)], _env(tmp_path / "x", inductor_dir))
    for rank in (0, 1):
        c, w = (torch.load(tmp_path / f"{n}.{rank}") for n in ("cold", "warm"))
        assert c["routed"] and w["routed"]
        assert_bitwise_equal(w["out"], c["out"])
        assert _graphs(w["stats"])[1] == 0 and _graphs(w["stats"])[0] >= 1, (rank, w["stats"])


def test_the_launcher_passes_the_command_through(tmp_path):
    env = _env(tmp_path / "c", tmp_path / "i")
    code = "import os, sys; print(os.environ['AOTCACHE_ENABLE'], os.environ['AOTCACHE_DIR'], sys.argv[1:]); sys.exit(3)"
    done = subprocess.run(
        [str(EXE), "--dir", str(tmp_path / "d"), "run", sys.executable, "-c", code, "--dir", "--help", "x"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3, done.stderr  # the command's own status
    assert done.stdout.split() == ["1", str(tmp_path / "d"), "['--dir',", "'--help',", "'x']"]  # its own arguments
    assert subprocess.run([str(EXE), "run"], capture_output=True).returncode == 2
    assert subprocess.run([str(EXE), "run", "--"], capture_output=True).returncode == 2
    assert subprocess.run([str(EXE), "run", "--", str(tmp_path / "missing")], capture_output=True).returncode == 127


# ---- in this process ------------------------------------------------------------------------------------------------
@pytest.fixture
def restored():
    from aotcache import default_backend

    cls = torch._TorchCompileInductorWrapper
    init, call = cls.__dict__["__init__"], cls.__dict__["__call__"]
    default_backend.disable()
    yield default_backend
    default_backend.disable()
    assert cls.__dict__["__init__"] is init and cls.__dict__["__call__"] is call
    torch._dynamo.reset()


def test_enable_routes_and_disable_gives_back(restored, cache_dir, monkeypatch):
    import aotcache

    monkeypatch.setenv("AOTCACHE_DIR", str(cache_dir))
    aotcache.reset_stats()
    assert aotcache.enable() is True and aotcache.enable() is True  # idempotent
    assert restored.enabled()

    def f(x):
        return x.relu() + 1

    x = torch.randn(4)
    assert_bitwise_equal({"y": torch.compile(f)(x)}, {"y": torch.relu(x) + 1})
    assert aotcache.stats()["misses"] == 1
    aotcache.disable()
    torch._dynamo.reset()
    aotcache.reset_stats()
    torch.compile(f)(x)
    assert aotcache.stats()["misses"] == 0 and aotcache.stats()["hits"] == 0  # plain inductor again


def test_aoti_and_named_wrappers_stay_on_inductor(restored):
    restored.enable()
    plain = torch._TorchCompileInductorWrapper(None, None, False)
    named = torch._TorchCompileInductorWrapper(None, None, False, "region")
    aoti = torch._TorchCompileAOTInductorWrapper(None, None, False)
    assert restored.routed(plain) and not restored.routed(named) and not restored.routed(aoti)
    assert restored.routed_options(torch._TorchCompileInductorWrapper("max-autotune-no-cudagraphs", None, False))


def test_a_torch_without_the_expected_wrapper_warns_once_and_runs_on_inductor(restored, monkeypatch, caplog):
    class Other:  # a torch that renamed or reshaped the wrapper
        pass

    from aotcache.torch_glue import features

    monkeypatch.setattr(features, "_resolved", {})  # probed afresh against this torch, restored after
    monkeypatch.setattr(features, "_reasons", {})
    monkeypatch.setattr(torch, "_TorchCompileInductorWrapper", Other)
    with caplog.at_level(logging.WARNING, logger="aotcache"):
        assert restored.enable() is False
        assert restored.enable() is False
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "default backend stays inductor" in warned[0].getMessage()
    monkeypatch.undo()
    x = torch.randn(4)
    assert_bitwise_equal({"y": torch.compile(lambda t: t * 2)(x)}, {"y": x * 2})


def test_startup_waits_for_torch_to_be_imported(tmp_path):
    """AOTCACHE_ENABLE=1 at interpreter start imports neither torch nor the backend; importing torch routes."""
    code = (
        "import sys; assert 'torch' not in sys.modules and 'aotcache.startup' in sys.modules;"
        "import torch; from aotcache import default_backend; assert default_backend.enabled();"
        "assert 'aotcache.backend' not in sys.modules; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "AOTCACHE_ENABLE": "1"}, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    done = subprocess.run(
        [sys.executable, "-c", "import sys; assert 'aotcache' not in sys.modules; print('ok')"],
        env={k: v for k, v in os.environ.items() if k != "AOTCACHE_ENABLE"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
