"""The vector-ISA probe memo (python/aotcache/isa_probe.py), each case in fresh processes: torch caches the probe's
answer for the life of a process, so only a new one probes again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUPPORT

HERE = SUPPORT


def probe(cache_dir: Path, inductor_dir: Path, *flags: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(inductor_dir)}
    out = subprocess.run(
        [sys.executable, str(HERE / "isa_probe_worker.py"), str(cache_dir), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def first(tmp_path, inductor_dir) -> dict:
    """A process that probed for real and wrote the memo."""
    result = probe(tmp_path, inductor_dir)
    if result["memo"] is None:
        pytest.skip("this machine has no /proc/cpuinfo: no memo")
    return result


def test_second_process_answers_from_the_memo_without_probing(tmp_path, inductor_dir, first):
    assert first["probed"] > 0 and first["answered"] == 0 and first["dlopen_children"] == first["probed"]
    memo = json.loads(Path(first["memo"]).read_text())
    assert len(memo["results"]) == first["probed"]

    second = probe(tmp_path, inductor_dir)
    assert (second["answered"], second["probed"], second["dlopen_children"]) == (first["probed"], 0, 0)
    assert (second["picked"], second["valid"]) == (first["picked"], first["valid"])


def test_the_memo_is_what_answers(tmp_path, inductor_dir, first):
    """Every result of this machine's memo flipped to False: torch then sees no usable vector ISA, so the answers
    really come from the memo (and the memo is only ever trusted as much as the cache directory)."""
    path = Path(first["memo"])
    memo = json.loads(path.read_text())
    memo["results"] = {name: False for name in memo["results"]}
    path.write_text(json.dumps(memo))
    flipped = probe(tmp_path, inductor_dir)
    assert flipped["probed"] == 0 and flipped["dlopen_children"] == 0
    assert flipped["valid"] == [] and flipped["picked"] == "INVALID_VEC_ISA"


def test_a_memo_of_another_machine_is_ignored(tmp_path, inductor_dir, first):
    path = Path(first["memo"])
    memo = json.loads(path.read_text())
    memo["fingerprint"]["cpu"]["flags"] += " avx10_9"  # another CPU, same file name: must not be believed
    memo["results"] = {name: False for name in memo["results"]}
    path.write_text(json.dumps(memo))
    other = probe(tmp_path, inductor_dir)
    assert other["answered"] == 0 and other["probed"] == first["probed"]
    assert other["valid"] == first["valid"]
    assert json.loads(path.read_text())["fingerprint"]["cpu"]["flags"] == memo["fingerprint"]["cpu"]["flags"][:-8]


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"fingerprint": 1}', b"\xff\xfe"])
def test_a_damaged_memo_is_ignored_and_rewritten(tmp_path, inductor_dir, first, damage):
    path = Path(first["memo"])
    path.write_bytes(damage)
    again = probe(tmp_path, inductor_dir)
    assert again["answered"] == 0 and again["probed"] == first["probed"] and again["valid"] == first["valid"]
    assert len(json.loads(path.read_text())["results"]) == first["probed"]


def test_off_when_disabled_or_when_the_user_forces_the_answer(tmp_path, inductor_dir):
    disabled = probe(tmp_path / "a", inductor_dir, "--disabled")
    assert disabled["answered"] == disabled["probed"] == 0 and disabled["dlopen_children"] > 0
    assert not (tmp_path / "a" / "probes").exists()
    # cpp.vec_isa_ok set: the user's answer stands, the memo stays out (torch still runs its bf16/VNNI sub-probes).
    forced = probe(tmp_path / "b", inductor_dir, "--vec-isa-ok")
    assert forced["answered"] == forced["probed"] == 0
    assert not (tmp_path / "b" / "probes").exists()
