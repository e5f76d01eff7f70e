"""A nanoGPT-style training script, written as users write it, that never names aotcache: a GPT (causal
self-attention, MLP, LayerNorm, tied embeddings) with random weights, AdamW with nanoGPT's decay / no-decay parameter
groups, nanoGPT's warmup + cosine learning-rate schedule set into the param groups as a Python float every
iteration, the model compiled, the optimizer step compiled, and nanoGPT's `generate` (temperature, top-k,
multinomial sampling) at the end, its sequence growing one token per call.

usage: nanogpt_train.py OUT.pt        (test_enable.py runs it plain, under `aotcache run`, and warm)

OUT (torch.save): {"out": {"losses", "lrs", "generated", "param.<name>"...}, "stats": aotcache's counters or None
when aotcache was never imported, "timing": seconds from the loop's start to the end of its first step, of all steps,
and of the whole job with generate}.
"""

from __future__ import annotations

import math
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

BLOCK_SIZE, VOCAB, N_LAYER, N_HEAD, N_EMBD = 16, 64, 2, 2, 32
MAX_ITERS, WARMUP_ITERS, LR_DECAY_ITERS = 6, 2, 6
LEARNING_RATE, MIN_LR, WEIGHT_DECAY = 6e-4, 6e-5, 0.1


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(N_EMBD), CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = nn.Sequential(nn.Linear(N_EMBD, 4 * N_EMBD), nn.GELU(), nn.Linear(4 * N_EMBD, N_EMBD))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, N_EMBD), nn.Embedding(BLOCK_SIZE, N_EMBD)
        self.h = nn.ModuleList(Block() for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return self.lm_head(x[:, [-1], :]), None

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=LEARNING_RATE, betas=(0.9, 0.95))

    @torch.no_grad()
    def generate(self, model, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= BLOCK_SIZE else idx[:, -BLOCK_SIZE:]
            logits, _ = model(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            idx_next = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def get_lr(it):
    if it < WARMUP_ITERS:
        return LEARNING_RATE * (it + 1) / (WARMUP_ITERS + 1)
    if it > LR_DECAY_ITERS:
        return MIN_LR
    ratio = (it - WARMUP_ITERS) / (LR_DECAY_ITERS - WARMUP_ITERS)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LEARNING_RATE - MIN_LR)


def main(out_path: str) -> int:
    torch.manual_seed(1337)
    raw = GPT()
    optimizer = raw.configure_optimizers()
    model = torch.compile(raw)
    step = torch.compile(optimizer.step)
    data = torch.randint(0, VOCAB, (256,), generator=torch.Generator().manual_seed(0))
    losses, lrs = [], []
    t0 = time.perf_counter()
    timing = {}
    for it in range(MAX_ITERS):
        lr = get_lr(it)
        for group in optimizer.param_groups:
            group["lr"] = lr
        ix = torch.randint(len(data) - BLOCK_SIZE, (4,), generator=torch.Generator().manual_seed(it))
        x = torch.stack([data[i : i + BLOCK_SIZE] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + BLOCK_SIZE] for i in ix])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        step()
        losses.append(loss.item())
        lrs.append(lr)
        if it == 0:
            timing["first_step_s"] = time.perf_counter() - t0
    timing["steps_s"] = time.perf_counter() - t0
    raw.eval()
    torch.manual_seed(42)
    generated = raw.generate(model, torch.zeros((1, 1), dtype=torch.long), 6, temperature=0.8, top_k=10)
    timing["job_s"] = time.perf_counter() - t0
    got = {
        "losses": torch.tensor(losses, dtype=torch.float64),
        "lrs": torch.tensor(lrs, dtype=torch.float64),
        "generated": generated,
        **{f"param.{n}": p.detach().clone() for n, p in raw.named_parameters()},
    }
    stats = None
    if "aotcache" in sys.modules:
        import aotcache

        stats = aotcache.stats()
    torch.save({"out": got, "stats": stats, "timing": timing}, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
