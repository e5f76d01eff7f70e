"""The passes of the cross-process suites (test_adversarial.py, test_zoo.py), shared by both.

A suite names its worker program (several cases per process, one `<PREFIX> {json}` line per case on stdout) and the
cases; `run_passes` runs them in fresh processes:
  inductor       the uncached backend="inductor" reference                        } concurrently
  cold           backend="aotcache" on an empty AOTCACHE_DIR                      }
  (between)      the suite's own step on the cold cache (the adversarial suite damages entries)
  warm           backend="aotcache" on the cold pass's directory, in `warm_processes` processes (cases dealt out in
                 turn), the frame cache as the environment says (on by default)         } concurrently
  warm_noframes  the same on a copy of that directory with the frame cache off          }
                 (AOTCACHE_FRAMES=0): Dynamo traces, every graph goes through the graph pipeline; only when `warm`
                 has frames on
So every case is judged warm with frames on and off from one cold pass (the cold pass, a compile of everything, is
most of the time). Each aotcache process writes the frame cache's guard log (conftest.with_guard_log). A process
that dies takes its remaining cases with it: each becomes a row with an `exception`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import frames_on, loaded_guards_unmatched, with_guard_log

HERE = Path(__file__).parent


ALL_WARM_LABELS = ("warm", "warm_noframes")


def warm_labels() -> tuple[str, ...]:
    """The warm passes `run_passes` runs in this environment (see the module's docstring)."""
    return ALL_WARM_LABELS if frames_on() else ("warm",)


def warm_labels_in(passes: dict) -> list[str]:
    """The warm passes present in loaded results (`passes`: label -> rows)."""
    return [label for label in ALL_WARM_LABELS if label in passes]


@dataclasses.dataclass(frozen=True)
class Worker:
    script: str  # the worker program, beside this file
    prefix: str  # its result lines: "<prefix> {json}"
    key: str  # the field of a row that names its case
    timeout_s: float  # of one process
    args: Callable[[str], list[str]] = lambda mode: []  # extra arguments for a mode ("inductor" or "aotcache")


def run_worker(worker: Worker, mode: str, label: str, names: list[str], out: Path, env: dict, log: Path) -> dict:
    """Runs one process over `names`; its rows by case name. Its stderr goes to `log`, its rows to log's .jsonl."""
    args = [sys.executable, str(HERE / worker.script), mode, str(out), "--label", label, *worker.args(mode), *names]
    with open(log, "w") as stderr:
        try:
            proc = subprocess.run(
                args, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=worker.timeout_s
            )
            stdout, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:  # its output so far is bytes, whatever text= says
            stdout, rc = (e.stdout or b"").decode(errors="replace"), f"timeout after {worker.timeout_s:.0f}s"
    head = worker.prefix + " "
    lines = [line[len(head) :] for line in stdout.splitlines() if line.startswith(head)]
    log.with_suffix(".jsonl").write_text("".join(line + "\n" for line in lines))
    rows = {row[worker.key]: row for row in map(json.loads, lines)}
    for name in names:
        if name not in rows:
            tail = log.read_text()[-3000:]
            rows[name] = {worker.key: name, "exception": f"worker {label} exited {rc}: {tail}", "stats": {}}
    return rows


def pass_env(root: Path) -> dict[str, str]:
    """The environment of every pass: this one without aotcache's settings (AOTCACHE_FRAMES stays: the suites run
    with frames on and off), the cache directories under `root`, no hub downloads, the tests on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTCACHE_") or k == "AOTCACHE_FRAMES"}
    env.update(
        {
            "AOTCACHE_DIR": str(root / "aotcache"),
            "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),  # one machine: shared by every pass
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        }
    )
    return env


def run_passes(
    root: Path,
    names: list[str],
    worker: Worker,
    *,
    warm_processes: int,
    between: Callable[[Path], Any] | None = None,
) -> dict[str, Any]:
    """The passes' rows ({"inductor"|"cold"|"warm"|"warm_noframes": {case: row}}), with "out" (the workers' result
    files), "between" (what `between(cache dir)` returned), "seconds" and "guard_logs" ({"cold"|"warm": [paths]})."""
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    env = pass_env(root)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        inductor = pool.submit(run_worker, worker, "inductor", "inductor", names, out, env, root / "inductor.log")
        cold_env = with_guard_log(env, root / "guards-cold.jsonl")
        cold = pool.submit(run_worker, worker, "aotcache", "cold", names, out, cold_env, root / "cold.log")
        passes: dict[str, Any] = {"inductor": inductor.result(), "cold": cold.result()}
    t1 = time.monotonic()
    passes["between"] = between(root / "aotcache") if between else None
    shards = [s for s in (names[i::warm_processes] for i in range(warm_processes)) if s]
    runs = []  # (label, process index, shard, environment, guard log)
    for label in warm_labels():
        label_env = env
        if label == "warm_noframes":  # its own copy: the frames-on processes may record into theirs
            # (and of the cases' private directories beside AOTCACHE_DIR: adversarial_cases.case_cache_dir)
            for suffix in ("", ".cases"):
                if (root / f"aotcache{suffix}").exists():
                    shutil.copytree(root / f"aotcache{suffix}", root / f"aotcache-noframes{suffix}")
            label_env = {**env, "AOTCACHE_DIR": str(root / "aotcache-noframes"), "AOTCACHE_FRAMES": "0"}
        for i, shard in enumerate(shards):
            log = root / f"guards-{label}{i}.jsonl"
            runs.append((label, i, shard, with_guard_log(label_env, log), log))
    with concurrent.futures.ThreadPoolExecutor(len(runs) or 1) as pool:
        futures = [
            (label, pool.submit(run_worker, worker, "aotcache", label, shard, out, e, root / f"{label}{i}.log"))
            for label, i, shard, e, _ in runs
        ]
        for label in warm_labels():
            passes[label] = {k: v for lab, f in futures if lab == label for k, v in f.result().items()}
    seconds = {"cold+inductor": t1 - t0, "warm": time.monotonic() - t1}
    (root / "seconds.json").write_text(json.dumps(seconds))
    guard_logs = {"cold": [root / "guards-cold.jsonl"], "warm": [log for label, *_, log in runs if label == "warm"]}
    return {**passes, "out": out, "seconds": seconds, "guard_logs": guard_logs}


def load_rows(root: Path, key: str, *files: str) -> dict[str, dict]:
    """The rows that earlier passes kept in `root` (their .jsonl files), by case name."""
    found = {}
    for f in files:
        if (root / f).exists():
            for line in (root / f).read_text().splitlines():
                row = json.loads(line)
                found[row[key]] = row
    return found


def check_loaded_guards(passes: dict[str, Any], min_loaded: int) -> None:
    """Every guard set a warm process loaded from a frame entry equals one Dynamo built tracing the same code (source
    by source, kind by kind; a content guard under the identity guard it replaced), and at least `min_loaded` were
    loaded. A warm process may record a frame too (its guards failed on that process's state, so it traced): the
    traces of every process count."""
    logs = passes["guard_logs"]
    loaded, unmatched = loaded_guards_unmatched(logs["warm"], logs["cold"] + logs["warm"])
    assert loaded >= min_loaded, f"only {loaded} guard sets loaded (at least {min_loaded} expected)"
    assert not unmatched, f"loaded guards that match no fresh trace: {unmatched}"
