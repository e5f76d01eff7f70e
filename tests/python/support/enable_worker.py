"""Programs that call torch.compile with the default backend and never name aotcache: run plain (the reference),
under `aotcache run`, or with AOTCACHE_ENABLE=1 (test_enable.py). Usage: enable_worker.py CASES OUT.

CASES:
  programs   several compiles in one process: a function, a module under no_grad, mode= and options= requests, a
             training step, a compiled optimizer step with an LR scheduler
  trainer    the Hugging Face Trainer with torch_compile=True (accelerate underneath), 3 steps of a small GPT-2
  rank       one torchrun rank: the programs' function and module (OUT gets the rank's number appended)

OUT (torch.save): {"out": {name: tensor}, "aotcache_imported_before_first_compile": bool, "stats": aotcache's counters
or None when aotcache was never imported, "routed": ..., "timing": for `trainer`, seconds from the start of training
to the end of the first step, and of all steps}.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

TIMING: dict[str, float] = {}


def _programs() -> dict[str, torch.Tensor]:
    out = {}

    def f(x):
        return torch.sin(x) * 2 + x.cos()

    torch.manual_seed(0)
    x = torch.randn(8, 8)
    out["fn"] = torch.compile(f)(x)

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        out["module"] = torch.compile(model)(torch.randn(4, 8))
    # The same function under other Inductor options: compiled with them (another entry), not served the default's.
    out["mode"] = torch.compile(f, mode="max-autotune-no-cudagraphs")(x + 1)
    out["options"] = torch.compile(f, options={"epilogue_fusion": False})(x + 2)

    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    loss = torch.compile(net)(torch.randn(4, 8)).square().mean()
    loss.backward()
    out["train.loss"] = loss.detach()
    out["train.grad"] = net[0].weight.grad.clone()

    # A compiled optimizer step with a scheduler (the learning rate a tensor, as torch recommends for compiled steps).
    opt = torch.optim.SGD(net.parameters(), lr=torch.tensor(0.05))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    @torch.compile
    def step():
        opt.step()

    for _ in range(2):
        step()
        sched.step()
    out["opt.weight"] = net[0].weight.detach().clone()
    return out


def _trainer(workdir: str) -> dict[str, torch.Tensor]:
    import transformers
    from transformers import Trainer, TrainingArguments

    class Data(torch.utils.data.Dataset):
        def __init__(self):
            self.ids = torch.randint(3, 64, (16, 8), generator=torch.Generator().manual_seed(0))

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    model = transformers.GPT2LMHeadModel(cfg)
    args = TrainingArguments(
        output_dir=workdir,
        torch_compile=True,
        use_cpu=True,
        report_to=[],
        max_steps=3,
        per_device_train_batch_size=4,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )

    class FirstStep(transformers.TrainerCallback):
        """Seconds from the start of training to the end of its first optimizer step (bench/jobs.py)."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                TIMING["first_step_s"] = time.perf_counter() - self.t0

    trainer = Trainer(model=model, args=args, train_dataset=Data(), callbacks=[FirstStep()])
    t0 = time.perf_counter()
    trainer.train()
    TIMING["steps_s"] = time.perf_counter() - t0
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"losses": torch.tensor(losses, dtype=torch.float64), "lm_head": model.lm_head.weight.detach().clone()}


def _rank() -> dict[str, torch.Tensor]:
    out = _programs()
    return {k: out[k] for k in ("fn", "module")}


def main() -> int:
    cases, out_path = sys.argv[1], sys.argv[2]
    before = "aotcache.backend" in sys.modules  # nothing compiled yet: the backend is imported at torch.compile()
    if cases == "programs":
        got = _programs()
    elif cases == "trainer":
        got = _trainer(os.path.dirname(out_path))
    elif cases == "rank":
        got = _rank()
        out_path += f".{os.environ.get('RANK', '0')}"
    else:
        raise SystemExit(f"unknown cases {cases!r}")
    stats = routed = None
    if "aotcache" in sys.modules:
        import aotcache
        from aotcache import default_backend

        stats = aotcache.stats()
        routed = default_backend.enabled()
    torch.save(
        {
            "out": {k: v.detach().clone() for k, v in got.items()},
            "backend_imported_at_start": before,
            "stats": stats,
            "routed": routed,
            "timing": TIMING,
        },
        out_path,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
