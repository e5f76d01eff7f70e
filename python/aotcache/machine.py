"""What a compiled C++ binary of Inductor depends on, beyond its source and command line: the machine it was built
and checked on. Used to decide whether a result measured or built on one machine holds on another: the vector-ISA
probe memo (isa_probe.py) and the kernel binaries carried in entries (kernels.py).

`-march=native` appears literally in Inductor's compile commands, so the command line (and the file name derived
from it) is the same on every CPU while the code is not: the CPU's model and full feature flags must match. So must
the compiler (its version also names the C++ runtime it links), the C library, torch (its version, build and
location: the kernels link against it and its headers' path is in the command line) and Python (the kernels are
Python extension modules).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
from typing import Any

import torch


def _cpu() -> dict[str, str] | None:
    """The CPU as /proc/cpuinfo tells it (first processor); None where that file does not exist."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block: every core of a machine is the same model
            continue
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    flags = fields.get("flags") or fields.get("Features") or fields.get("features")
    if not flags:
        return None
    return {
        "model": fields.get("model name") or fields.get("CPU part") or "",
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer") or "",
        "flags": " ".join(sorted(flags.split())),
    }


@functools.cache
def _describe() -> dict[str, Any] | None:
    from aotcache.torch_glue.inductor import cpp_builder

    cpu = _cpu()
    if cpu is None:
        return None
    cxx = cpp_builder.get_cpp_compiler()
    libc, libc_version = platform.libc_ver()
    return {
        "platform": f"{sys.platform}-{platform.machine()}",
        "cpu": cpu,
        "cxx": cxx,
        "cxx_version": cpp_builder.get_compiler_version_info(cxx),
        "libc": f"{libc} {libc_version}".strip(),
        "torch": str(torch.__version__),
        "torch_git": torch.version.git_version,
        "torch_dir": os.path.dirname(os.path.abspath(torch.__file__)),
        "python": sys.version,
    }


OVERRIDE_VAR = "AOTCACHE_MACHINE_OVERRIDE"


def describe() -> dict[str, Any] | None:
    """The machine and build, as a JSON-able dict; None where the CPU cannot be told (no /proc/cpuinfo). Probed
    once per process (a copy is returned). AOTCACHE_MACHINE_OVERRIDE (a JSON object) replaces fields: for tests
    that simulate another machine, never for production use."""
    d = _describe()
    if d is None:
        return None
    d = {**d, "cpu": dict(d["cpu"])}
    override = os.environ.get(OVERRIDE_VAR)
    if override:
        try:
            fields = json.loads(override)
        except ValueError:
            fields = None
        if isinstance(fields, dict):
            d.update(fields)
    return d
