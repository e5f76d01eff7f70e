"""A served frame's guard check beside a traced frame's, in the process: N blocks of Linear(4, 4) + ReLU (as
bench/call_overhead.py's `blocks:N`), compiled, then the frame's guard manager timed alone (`check` on the frame's
locals) and the whole call, both under no_grad. The manager is the one Dynamo built last: from the trace
(`CheckFunctionManager`, backend inductor or a cold aotcache process) or from a frame entry
(`torch._dynamo.package.load_guard_manager`, a warm aotcache process).

    AOTCACHE_DIR=/tmp/g400 .venv/bin/python bench/frame_guard_check.py 400 aotcache   # twice: cold, then warm
    .venv/bin/python bench/frame_guard_check.py 400 inductor

Run the two alternately, several times: on a shared machine the spread between processes is larger than the effect.
"""

from __future__ import annotations

import sys
import time

import torch
import torch._dynamo.guards as dynamo_guards
import torch._dynamo.package as dynamo_package


def main() -> int:
    blocks, backend = int(sys.argv[1]), sys.argv[2]
    managers: list[tuple[str, object]] = []
    original_init = dynamo_guards.CheckFunctionManager.__init__
    original_load = dynamo_package.load_guard_manager

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        managers.append(("traced", self.guard_manager))

    def load(*args, **kwargs):
        manager = original_load(*args, **kwargs)
        managers.append(("loaded", manager))
        return manager

    dynamo_guards.CheckFunctionManager.__init__ = init
    dynamo_package.load_guard_manager = load
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(blocks)])
    x = torch.randn(2, 4)
    compiled = torch.compile(model, backend=backend)
    torch.set_grad_enabled(False)
    for _ in range(50):
        compiled(x)
    how, manager = managers[-1]
    frame_locals = {"args": (x,), "kwargs": {}, "fn": model, "self": model}
    if not manager.check(frame_locals):
        print("the manager rejects these locals:", manager.check_verbose(frame_locals).verbose_code_parts[:3])
        return 1
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5000):
            manager.check(frame_locals)
        check_us = (time.perf_counter() - start) / 5000 * 1e6
        start = time.perf_counter()
        for _ in range(2000):
            compiled(x)
        call_us = (time.perf_counter() - start) / 2000 * 1e6
        print(f"{backend} {how}: guard check {check_us:.1f} us, call {call_us:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
