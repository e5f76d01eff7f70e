"""Fault injection at every phase of the pipeline: the user's call returns the right result, nothing escapes, and
the reason is counted as `internal_error.<phase>` (fault_injection_worker.py makes each step raise in turn)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SUPPORT
from fault_injection_worker import COUNTED_AS, PHASES

HERE = SUPPORT
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("faults")
    env = dict(os.environ)
    env.update(
        {
            "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        }
    )
    env.pop("AOTCACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, str(HERE / "fault_injection_worker.py"), str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line[len("RESULT ") :])
            out[row["phase"]] = row
    print("\nphase | graphs | fault fired | escaped | equal to inductor | internal_errors")
    for row in out.values():
        print(
            f"{row['phase']} | {row['which']} | {row['fired']} | {row['escaped']} | {row['equal']} | "
            f"{row['internal_errors']}"
        )
    return out


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_fault_in_each_phase_is_contained_and_counted(rows, phase):
    row = rows[phase]
    assert row["fired"] > 0, f"the fault in {phase} never fired: the test does not reach that step"
    assert row["escaped"] is None, f"{phase}: {row['escaped']}"
    assert row["equal"], f"{phase}: results differ from backend='inductor'"
    counted = COUNTED_AS.get(phase, phase)
    if counted is not None:
        assert row["internal_errors"].get(counted, 0) >= 1, row["stats"]
    # Whatever failed, no graph was run eagerly in silence: every compile is a hit, a miss, a bypass or counted.
    stats = row["stats"]
    outcomes = stats.get("hits", 0) + stats.get("misses", 0) + stats.get("bypasses", 0) + stats.get("errors", 0)
    assert outcomes >= (1 if row["which"] == "symbolic" else 2) or counted is None, stats
