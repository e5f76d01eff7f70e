"""Real clients of torch.compile in one process: PyTorch Lightning's Trainer fitting a compiled LightningModule, and
a PEFT LoRA adapter on a small Llama (a compiled training step and a compiled inference forward). Models from
configs with random weights, fixed seeds, CPU.

    python clients_worker.py BACKEND OUT.pt [CLIENT...]
        BACKEND: aotcache | inductor (torch's caches off) | inductor-cached (torch's caches on, as by default)

Writes {client: {name: tensor}}, prints one line "STATS <json>" with aotcache.stats() (aotcache only) and one line
"TIMES <json>": each client's seconds from the start of its run to its results (imports done before: the zoo's
first-step measure). test_clients.py runs it cold, warm and under inductor; bench/clients.py times it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def _lightning_module() -> type:
    """The LightningModule class (module level: a frame's guards name its class by import path)."""
    global Regressor
    import pytorch_lightning as pl

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    Regressor.__qualname__ = "Regressor"
    return Regressor


def lightning(backend: str) -> dict[str, torch.Tensor]:
    import pytorch_lightning as pl

    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randn(32, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model = _lightning_module()()
    model.forward = torch.compile(model.forward, backend=backend)  # what a compiled LightningModule runs
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)
    with torch.no_grad():
        probe = model(torch.ones(2, 16))
    return {"probe": probe, **{f"param.{n}": p.detach().clone() for n, p in model.named_parameters()}}


def peft_lora(backend: str) -> dict[str, torch.Tensor]:
    import peft
    import transformers

    torch.manual_seed(1)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    base = transformers.LlamaForCausalLM(config)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    model = peft.get_peft_model(base, lora)
    compiled = torch.compile(model, backend=backend)
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(2))
    out = compiled(input_ids=ids, labels=ids)
    out.loss.backward()
    grads = {f"grad.{n}": p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.eval()
    with torch.no_grad():
        logits = compiled(input_ids=ids).logits
    return {"loss": out.loss.detach(), "logits": logits, **grads}


CLIENTS = {"lightning": lightning, "peft_lora": peft_lora}


def main() -> int:
    backend, out = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(CLIENTS)
    if backend == "aotcache":
        import aotcache  # noqa: F401  (registers the backend)
    elif backend == "inductor":
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    else:
        backend = "inductor"  # inductor-cached: torch's own caches as they are by default
    import peft  # noqa: F401  (the clients' imports, outside the timed runs)
    import pytorch_lightning  # noqa: F401
    import transformers  # noqa: F401

    logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(levelname)s %(message)s", stream=sys.stdout)
    logging.getLogger("aotcache").setLevel(logging.INFO)
    results, times = {}, {}
    for name in names:
        torch._dynamo.reset()
        started = time.perf_counter()
        results[name] = CLIENTS[name](backend)
        times[name] = time.perf_counter() - started
    torch.save(results, out)
    print("TIMES " + json.dumps(times, sort_keys=True))
    if backend == "aotcache":
        import aotcache

        print("STATS " + json.dumps(aotcache.stats(), sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
