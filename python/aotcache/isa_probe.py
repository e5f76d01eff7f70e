"""Remembering Inductor's vector-ISA probe across processes.

Before it generates or loads any C++ kernel, Inductor asks which vector ISA the machine supports
(`torch._inductor.cpu_vec_isa.valid_vec_isa_list`). For each candidate ISA the CPU claims, `VecISA.check_build`
builds a small probe library with that ISA's flags (once per Inductor cache directory) and then dlopens it in a
child Python, in every process: about 1.2 s of a 2.5 s warm start on this project's machine (bench/README.md), and
the build itself (about 14 s, six g++ runs) on a machine whose Inductor cache directory is new.

aotcache computes the environment key component, which holds the picked ISA, before anything else of torch needs
it, so it can answer the probe from a memo: `<cache dir>/probes/vec-isa-<fingerprint>.json`, written by a process
that ran the real probe. The fingerprint holds everything the probe's result depends on: the CPU (model name, the
full feature flags of /proc/cpuinfo, the ISA features torch reads), the C++ compiler and its version, torch's
version and build, the Python version and the loader path (LD_LIBRARY_PATH) of the child that dlopens the probe.
Another CPU or compiler makes another fingerprint, so a memo is never used on a machine it was not measured on.
The memo only ever answers `check_build` calls it saw answered by the real probe; anything else runs the real
probe. A memo that cannot be read or parsed is ignored (the real probe runs and rewrites it).

The patch is in force only while aotcache computes its environment for the first time in a process, and only when
torch has not probed yet in this process; torch caches the answer itself (functools.cache) for the rest of it.
Off with `AOTCACHE_ISA_PROBE_MEMO=0` (or `configure(isa_probe_memo=False)`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

from aotcache import machine, torch_glue
from aotcache.storage import private_files
from aotcache.torch_glue.patching import Patches

log = logging.getLogger("aotcache")

MEMO_FORMAT = 1
MEMO_DIR = "probes"


def fingerprint() -> dict[str, Any] | None:
    """What the probe's result depends on: the machine and build (`machine.py`) and the loader path of the child
    that dlopens the probe. None where the machine cannot be told (no /proc/cpuinfo): no memo then."""
    base = machine.describe()
    if base is None:
        return None
    from aotcache.torch_glue.inductor import x86_isa_checker

    return {
        "format": MEMO_FORMAT,
        **base,
        "torch_isa_features": x86_isa_checker(),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
    }


def memo_path(cache_dir: str, fp: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(cache_dir, MEMO_DIR, f"vec-isa-{digest}.json")


def _probe_name(isa: Any, code: str) -> str:
    """One check_build call: the ISA, its flags at the time of the call (the bf16/AMX-fp16 sub-probes change them)
    and the probe program."""
    return f"{type(isa).__name__}|{isa.build_arch_flags()}|{hashlib.sha256(code.encode()).hexdigest()[:32]}"


def read_memo(path: str, fp: dict[str, Any]) -> dict[str, bool]:
    """The remembered results, or {} when the file is missing, unreadable or not for this fingerprint."""
    try:
        with open(path, encoding="utf-8") as f:
            st = os.fstat(f.fileno())
            if st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o022:
                log.info("ignoring the vector-ISA probe memo %s: another user could have written it", path)
                return {}
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.info("ignoring the vector-ISA probe memo %s: %s", path, e)
        return {}
    if not isinstance(data, dict) or data.get("fingerprint") != fp or not isinstance(data.get("results"), dict):
        log.info("ignoring the vector-ISA probe memo %s: not for this machine or malformed", path)
        return {}
    return {k: v for k, v in data["results"].items() if isinstance(k, str) and isinstance(v, bool)}


def _write_memo(path: str, fp: dict[str, Any], results: dict[str, bool]) -> None:
    """Atomically (temporary file + rename), so a reader sees the old memo or the new one; private (0700 folder,
    0600 file) whatever the umask."""
    data = {"fingerprint": fp, "results": dict(sorted(results.items()))}
    private_files.write_atomic(path, json.dumps(data, indent=1, sort_keys=True))


_entered = False  # the memo is consulted once per process: torch keeps the answer after that


def _torch_probed_already() -> bool:
    from aotcache.torch_glue.inductor import cpu_vec_isa

    info = getattr(cpu_vec_isa.valid_vec_isa_list, "cache_info", None)  # absent when someone wrapped it
    return info is not None and info().currsize > 0


class Outcome:
    """What happened in `remembered`: for the counters and the tests."""

    def __init__(self) -> None:
        self.answered = 0  # check_build calls the memo answered
        self.probed = 0  # check_build calls that ran the real probe

    def counters(self) -> dict[str, int]:
        out = {}
        if self.answered:
            out["isa_probe.remembered"] = self.answered
        if self.probed:
            out["isa_probe.probed"] = self.probed
        return out


@contextlib.contextmanager
def remembered(cache_dir: str, enabled: bool = True) -> Iterator[Outcome]:
    """While in force, `VecISA.check_build` answers from the memo for this machine, and records what the real
    probe answers. No-op when disabled, when torch has probed already in this process, when the user forced
    `cpp.vec_isa_ok`, or where the machine cannot be fingerprinted. Never raises for the memo's own faults."""
    global _entered
    outcome = Outcome()
    from aotcache.torch_glue.inductor import inductor_config

    if _entered or not enabled or inductor_config.cpp.vec_isa_ok is not None:
        yield outcome
        return
    found = torch_glue.resolve("isa_probe_memo")
    if found is None or _torch_probed_already():
        yield outcome
        return
    _entered = True
    try:
        fp = fingerprint()
    except Exception as e:  # a private torch helper moved: no memo, the real probe runs
        log.info("vector-ISA probe memo off: %r", e)
        fp = None
    if fp is None:
        yield outcome
        return
    VecISA = found["VecISA"]
    path = memo_path(cache_dir, fp)
    known = read_memo(path, fp)
    learned: dict[str, bool] = {}
    real_check_build = found["check_build"]

    def check_build(self: Any, code: str) -> bool:
        name = _probe_name(self, code)
        if name in known:
            outcome.answered += 1
            return known[name]
        result = real_check_build(self, code)
        outcome.probed += 1
        learned[name] = bool(result)
        return result

    try:
        with Patches("the vector-ISA probe memo").replace(VecISA, "check_build", check_build).applied():
            yield outcome
    finally:
        if learned:
            try:
                _write_memo(path, fp, {**known, **learned})
            except OSError as e:
                log.info("could not write the vector-ISA probe memo %s: %s", path, e)
