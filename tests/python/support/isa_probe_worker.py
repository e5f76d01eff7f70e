"""One process asking Inductor for its vector ISA inside aotcache's probe memo: prints a JSON line.

python isa_probe_worker.py CACHE_DIR [--disabled] [--vec-isa-ok]
"""

from __future__ import annotations

import json
import sys

import torch._inductor.config as inductor_config
from torch._inductor import cpu_vec_isa

from aotcache import isa_probe


def main() -> None:
    cache_dir = sys.argv[1]
    if "--vec-isa-ok" in sys.argv:
        inductor_config.cpp.vec_isa_ok = True
    children = []
    real_probe_load = cpu_vec_isa.VecISA._probe_load

    def probe_load(self, output_path: str) -> bool:  # the dlopen child the real probe spawns
        children.append(output_path)
        return real_probe_load(self, output_path)

    cpu_vec_isa.VecISA._probe_load = probe_load
    with isa_probe.remembered(cache_dir, enabled="--disabled" not in sys.argv) as outcome:
        picked = str(cpu_vec_isa.pick_vec_isa())
        valid = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    fp = isa_probe.fingerprint()
    print(
        json.dumps(
            {
                "picked": picked,
                "valid": valid,
                "answered": outcome.answered,
                "probed": outcome.probed,
                "dlopen_children": len(children),
                "memo": isa_probe.memo_path(cache_dir, fp) if fp else None,
            }
        )
    )


if __name__ == "__main__":
    main()
