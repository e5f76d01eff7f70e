"""Fixtures: a fresh cache directory per test, and running a workload in a fresh Python process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

TESTS = Path(__file__).resolve().parent  # tests/python: the tests, grouped by area in its folders
SUPPORT = TESTS / "support"  # the workers, case tables and helpers the tests run and import
REPO = TESTS.parents[1]
HERE = SUPPORT  # where a fresh process's program lives (workloads.py and the suites' workers)
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

from redis_server import redis, redis_factory  # noqa: E402, F401  (fixtures shared by the remote tests)


@dataclasses.dataclass
class RunResult:
    stats: dict
    aot_autograd: dict
    inductor: dict
    tensors: dict
    log: list[str]
    stdout: str
    cxx_builds: int = 0  # C++ compiler runs of Inductor (kernels, headers, probes) in the process
    compiler_modules: list[str] = dataclasses.field(default_factory=list)  # Inductor compiler modules it imported

    def log_lines(self, kind: str) -> list[str]:
        """The aotcache INFO/WARNING lines, e.g. kind='hit'."""
        return [ln for ln in self.log if f" aotcache INFO {kind} " in ln]


@pytest.fixture(scope="session")
def inductor_dir(tmp_path_factory) -> Path:
    """Inductor's kernel directory, shared by the tests' processes (as on one machine) but not the user's: the one
    AOTCACHE_TEST_INDUCTOR_DIR names (make test sets one for both pytest-xdist workers, so a kernel is built once
    per run), else one per worker."""
    shared = os.environ.get("AOTCACHE_TEST_INDUCTOR_DIR")
    if shared:
        Path(shared).mkdir(parents=True, exist_ok=True)
        return Path(shared)
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    d = tmp_path / "aotcache"
    return d


class FreshProcess:
    """A workload running in a new interpreter; `result()` waits for it and parses its RESULT line."""

    def __init__(
        self,
        workload: str,
        out: Path,
        flags: tuple[str, ...],
        env: dict,
        expect_ok: bool,
        cwd: Path | None = None,
        umask: int = -1,
    ):
        self.workload, self.out, self.expect_ok = workload, out, expect_ok
        self.stdout_path, self.stderr_path = out.with_suffix(".stdout"), out.with_suffix(".stderr")
        with open(self.stdout_path, "w") as stdout, open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "workloads.py"), workload, str(out), *flags],
                env=env,
                cwd=cwd,
                stdout=stdout,
                stderr=stderr,
                text=True,
                umask=umask,
            )

    def wait_for_output(self, text: str, timeout: float = 300) -> None:
        """Blocks until the process has printed `text` (its log goes to stdout as it runs)."""
        deadline = time.monotonic() + timeout
        while text not in self.stdout_path.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.workload} never printed {text!r}:\n{self.stdout_path.read_text()}")
            time.sleep(0.05)

    def result(self, timeout: float = 600) -> RunResult:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"workload {self.workload} timed out:\n{self.stdout_path.read_text()}") from None
        stdout, stderr = self.stdout_path.read_text(), self.stderr_path.read_text()
        if self.expect_ok and self.proc.returncode != 0:
            raise AssertionError(f"workload {self.workload} failed ({self.proc.returncode}):\n{stdout}\n{stderr}")
        line = next(ln for ln in stdout.splitlines() if ln.startswith("RESULT "))
        data = json.loads(line[len("RESULT ") :])
        return RunResult(
            stats=data["stats"],
            aot_autograd=data["aot_autograd"],
            inductor=data["inductor"],
            tensors=torch.load(self.out),
            log=[ln for ln in stdout.splitlines() if ln.startswith("LOG ")],
            stdout=stdout + stderr,
            cxx_builds=data.get("cxx_builds", 0),
            compiler_modules=data.get("compiler_modules", []),
        )


@pytest.fixture
def spawn_fresh(tmp_path, cache_dir, inductor_dir):
    """spawn_fresh(workload, *flags, env={...}, cwd=None, umask=-1) -> FreshProcess, started in a new interpreter
    against `cache_dir` (several may run at once; umask -1 keeps this process's)."""
    counter = iter(range(1000))
    started: list[FreshProcess] = []

    def spawn(
        workload: str,
        *flags: str,
        env: dict | None = None,
        expect_ok: bool = True,
        cwd: Path | None = None,
        umask: int = -1,
    ) -> FreshProcess:
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
        started.append(FreshProcess(workload, out, flags, full_env, expect_ok, cwd, umask))
        return started[-1]

    yield spawn
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


@pytest.fixture
def run_fresh(spawn_fresh):
    """run_fresh(workload, *flags, env={...}, cwd=None, umask=-1) -> RunResult, in a new interpreter against
    `cache_dir`."""

    def run(
        workload: str,
        *flags: str,
        env: dict | None = None,
        expect_ok: bool = True,
        cwd: Path | None = None,
        umask: int = -1,
    ) -> RunResult:
        return spawn_fresh(workload, *flags, env=env, expect_ok=expect_ok, cwd=cwd, umask=umask).result()

    return run


def assert_bitwise_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), f"{k} differs: max {(a[k] - b[k]).abs().max()}"


def frames_on(env: dict | None = None) -> bool:
    """Whether a fresh process with `env` (or this one's environment) runs with the frame cache on (the default):
    the suites run with it on and off (make test), and a warm process whose frames hit is served without tracing."""
    value = (env or {}).get("AOTCACHE_FRAMES", os.environ.get("AOTCACHE_FRAMES", "1"))
    return value.strip().lower() not in ("0", "false", "no", "off")


def graph_keys(cache_dir: Path) -> list[str]:
    """The keys of a cache directory's graph entries, in the store's order; frame entries left out (with frames on,
    a compiled frame adds one), so the facts about graph entries hold with frames on and off."""
    from aotcache import _core

    # Read without decoding: `get` would mark the entry used (and move a damaged one aside). The metadata, which
    # names a frame entry's kind, sits near the file's start (docs/formats/entry-format.md).
    store = _core.LocalStore.open(str(cache_dir))
    return [k for k, _, _ in store.list() if b"aotcache.frame" not in (store.read_entry_file(k) or b"")[:4096]]


def with_guard_log(env: dict, path: Path) -> dict:
    """`env` with the frame cache's guard log (AOTCACHE_FRAMES_GUARD_LOG) going to `path` when frames are on."""
    return {**env, "AOTCACHE_FRAMES_GUARD_LOG": str(path)} if frames_on(env) else env


def read_guard_log(path: Path) -> list[dict]:
    """The guard sets a process built (AOTCACHE_FRAMES_GUARD_LOG: one JSON line per set, `how` traced or loaded),
    Dynamo's per-process builtins-dict name normalized."""
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    for row in rows:
        row["guards"] = sorted(
            (re.sub(r"__builtins_dict___\d+", "__builtins_dict__", name), kind) for name, kind in row["guards"]
        )
    return rows


def loaded_guards_unmatched(loaded_logs: list[Path], traced_logs: list[Path]) -> tuple[int, list[str]]:
    """(guard sets loaded from frame entries, those of them equal to no set Dynamo built tracing the same code in
    the `traced_logs` processes). Equal means source by source and kind by kind, a content guard standing under the
    identity guard it replaced (frames/guard_log.py logs both sides that way)."""
    traced: dict[str, list] = {}
    for path in traced_logs:
        for r in read_guard_log(path):
            if r["how"] == "traced":
                traced.setdefault(r["code"], []).append(r["guards"])
    loaded = [r for path in loaded_logs for r in read_guard_log(path) if r["how"] == "loaded"]
    return len(loaded), [r["name"] for r in loaded if r["guards"] not in traced.get(r["code"], [])]


def cli(cache_dir: Path, *args: str, expect_rc: int = 0) -> str:
    """Runs the installed `aotcache` program (beside this interpreter) and returns its stdout."""
    exe = Path(sys.executable).parent / "aotcache"
    proc = subprocess.run([str(exe), "--dir", str(cache_dir), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect_rc, f"aotcache {' '.join(args)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc.stdout


# ---- time per test file ------------------------------------------------------------------------------------------
# CI's budget is spent per file (pytest-xdist gives each worker one file at a time): the session ends with every
# file's total (setup, call and teardown of its tests), longest first, so the next person sees where the time goes.
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section(f"seconds per test file (all workers: {total:.0f} s)")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {path}")
