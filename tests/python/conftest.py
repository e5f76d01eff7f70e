"""Fixtures: a fresh cache directory per test, and running a workload in a fresh Python process."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent


@dataclasses.dataclass
class RunResult:
    stats: dict
    aot_autograd: dict
    inductor: dict
    tensors: dict
    log: list[str]
    stdout: str

    def log_lines(self, kind: str) -> list[str]:
        """The aotcache INFO/WARNING lines, e.g. kind='hit'."""
        return [ln for ln in self.log if f" aotcache INFO {kind} " in ln]


@pytest.fixture(scope="session")
def inductor_dir(tmp_path_factory) -> Path:
    """Inductor's kernel directory, shared by the tests' processes (as on one machine) but not the user's."""
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    d = tmp_path / "aotcache"
    return d


@pytest.fixture
def run_fresh(tmp_path, cache_dir, inductor_dir):
    """run_fresh(workload, *flags, env={...}) -> RunResult, in a new interpreter against `cache_dir`."""
    counter = iter(range(1000))

    def run(workload: str, *flags: str, env: dict | None = None, expect_ok: bool = True) -> RunResult:
        out = tmp_path / f"run{next(counter)}.pt"
        full_env = dict(os.environ)
        full_env.update(
            {
                "AOTCACHE_DIR": str(cache_dir),
                "TORCHINDUCTOR_CACHE_DIR": str(inductor_dir),
                "PYTHONPATH": os.pathsep.join([str(HERE), full_env.get("PYTHONPATH", "")]),
            }
        )
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, str(HERE / "workloads.py"), workload, str(out), *flags],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if expect_ok and proc.returncode != 0:
            raise AssertionError(f"workload {workload} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
        data = json.loads(line[len("RESULT ") :])
        return RunResult(
            stats=data["stats"],
            aot_autograd=data["aot_autograd"],
            inductor=data["inductor"],
            tensors=torch.load(out),
            log=[ln for ln in proc.stdout.splitlines() if ln.startswith("LOG ")],
            stdout=proc.stdout + proc.stderr,
        )

    return run


def assert_bitwise_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), f"{k} differs: max {(a[k] - b[k]).abs().max()}"


def cli(cache_dir: Path, *args: str, expect_rc: int = 0) -> str:
    """Runs the installed `aotcache` program (beside this interpreter) and returns its stdout."""
    exe = Path(sys.executable).parent / "aotcache"
    proc = subprocess.run([str(exe), "--dir", str(cache_dir), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect_rc, f"aotcache {' '.join(args)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc.stdout
