"""The model zoo: small Hugging Face models built in code (random weights, nothing downloaded) and their workloads.

Used by tests/python/support/zoo_worker.py (tests/python/integration/test_zoo.py) and bench/zoo.py. A zoo item is
"MODEL:WORKLOAD"; `prepare(item, backend)` builds the model and inputs (seeded, not timed) and returns a callable that
compiles and runs the workload with `torch.compile(..., backend=backend)` (or a peer: `EAGER`, `AOT_COMPILE`) and
returns every result as a dict of tensors. Workloads run under torch.use_deterministic_algorithms(True) (Inductor's CPU
embedding backward accumulates in thread order otherwise) with fixed seeds, so two processes give bitwise equal results.

  train     one training step in train mode (dropout on where the config has it): loss, logits, gradients
  infer     one inference call in eval mode under no_grad: logits
  adamw     3 training steps, compiled model and compiled AdamW step (torch.compile(opt.step)): losses, parameters
  generate  (decoders) greedy generate() of 16 new tokens with model.forward compiled: the tokens
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere in the process: never download

import torch  # noqa: E402

WORKLOADS = ("train", "infer", "adamw", "generate")
NEW_TOKENS = 16
# The CI subset (test_zoo.py without AOTCACHE_ZOO): a causal decoder's training step and greedy generation (dynamic
# shapes from the growing KV cache), and an encoder-decoder's training step.
CI_ITEMS = ("gpt2:train", "gpt2:generate", "t5:train")


def _hf() -> Any:
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    description: str
    build: Callable[[], torch.nn.Module]
    """The model, random weights (seeded inside)."""
    train_batch: Callable[[], dict[str, torch.Tensor]]
    """Keyword arguments of a training call, labels included (the model computes its loss)."""
    infer_batch: Callable[[], dict[str, torch.Tensor]]
    generate_inputs: Callable[[], dict[str, Any]] | None = None
    """Keyword arguments of generate() (decoders only)."""


def _ids(shape: tuple[int, int], vocab: int, seed: int, low: int = 3) -> torch.Tensor:
    return torch.randint(low, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- the models ---------------------------------------------------------------------------------------------------
# Small enough that one cold compile takes 10-40 s on 2 cores; initializer ranges raised where the default init
# makes greedy decoding repeat one token (a wrong result would then hardly show).
def _gpt2() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(100)
    cfg = hf.GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64, initializer_range=0.3,
        bos_token_id=0, eos_token_id=1, tie_word_embeddings=True,
    )  # fmt: skip
    return hf.GPT2LMHeadModel(cfg)


def _bert() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(101)
    cfg = hf.BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    )  # fmt: skip
    return hf.BertForMaskedLM(cfg)


def _bert_batch() -> dict[str, torch.Tensor]:
    ids = _ids((2, 16), 128, seed=11)
    labels = torch.full_like(ids, -100)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[:, 2::5] = True
    labels[masked] = ids[masked]
    ids = ids.masked_fill(masked, 2)  # the [MASK] token
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def _llama() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(102)
    cfg = hf.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.3, bos_token_id=0, eos_token_id=1,
        pad_token_id=0,
    )  # fmt: skip
    return hf.LlamaForCausalLM(cfg)


def _t5() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(103)
    cfg = hf.T5Config(
        vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, initializer_factor=16.0,
    )  # fmt: skip
    return hf.T5ForConditionalGeneration(cfg)


def _vit() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(104)
    cfg = hf.ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=10,
    )  # fmt: skip
    return hf.ViTForImageClassification(cfg)


def _whisper() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(105)
    cfg = hf.WhisperConfig(
        vocab_size=128, num_mel_bins=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
        max_target_positions=48, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=3,
        suppress_tokens=None, begin_suppress_tokens=None, init_std=0.3,
    )  # fmt: skip
    return hf.WhisperForConditionalGeneration(cfg)


def _features() -> torch.Tensor:
    return _randn(2, 16, 32, seed=15)  # (batch, mel bins, frames = 2 * max_source_positions)


def _lm_batch(seed: int) -> dict[str, torch.Tensor]:
    ids = _ids((2, 16), 128, seed=seed)
    return {"input_ids": ids, "labels": ids}


def _causal_generate() -> dict[str, Any]:
    ids = _ids((2, 5), 128, seed=12)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pad_token_id": 0}


_ZOO = (
    ZooModel(
        "gpt2",
        "GPT-2 LM head, tied embeddings, 2 layers, dim 64",
        _gpt2,
        lambda: _lm_batch(seed=10),
        lambda: {"input_ids": _ids((2, 16), 128, seed=10)},
        _causal_generate,
    ),
    ZooModel(
        "bert",
        "BERT masked LM, dropout 0.1 (train mode), 2 layers, dim 32",
        _bert,
        _bert_batch,
        lambda: {k: v for k, v in _bert_batch().items() if k != "labels"},
    ),
    ZooModel(
        "llama",
        "Llama causal LM, GQA (4 heads, 2 KV heads), RoPE, 2 layers, dim 32",
        _llama,
        lambda: _lm_batch(seed=13),
        lambda: {"input_ids": _ids((2, 16), 128, seed=13)},
        _causal_generate,
    ),
    ZooModel(
        "t5",
        "T5 conditional generation, 2+2 layers, dim 32",
        _t5,
        lambda: {
            "input_ids": _ids((2, 12), 128, seed=14),
            "attention_mask": torch.ones(2, 12, dtype=torch.long),
            "labels": _ids((2, 8), 128, seed=16),
        },
        lambda: {
            "input_ids": _ids((2, 12), 128, seed=14),
            "attention_mask": torch.ones(2, 12, dtype=torch.long),
            "decoder_input_ids": _ids((2, 8), 128, seed=16),
        },
        lambda: {"input_ids": _ids((2, 12), 128, seed=14), "attention_mask": torch.ones(2, 12, dtype=torch.long)},
    ),
    ZooModel(
        "vit",
        "ViT image classification, 32x32 images, patch 8, 2 layers, dim 32",
        _vit,
        lambda: {"pixel_values": _randn(2, 3, 32, 32, seed=17), "labels": torch.tensor([3, 7])},
        lambda: {"pixel_values": _randn(2, 3, 32, 32, seed=17)},
    ),
    ZooModel(
        "whisper",
        "Whisper conditional generation, random input features, 2+2 layers, dim 32",
        _whisper,
        lambda: {"input_features": _features(), "labels": _ids((2, 8), 128, seed=18)},
        lambda: {"input_features": _features(), "decoder_input_ids": _ids((2, 8), 128, seed=18)},
        lambda: {"input_features": _features()},
    ),
)


# ---- scale: not in the zoo's default items (bench/peers.py's scale rows) ------------------------------------------
def _gpt2_124m() -> torch.nn.Module:
    hf = _hf()
    torch.manual_seed(101)
    cfg = hf.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)  # GPT-2 small's shape
    return hf.GPT2LMHeadModel(cfg)


def _lm_124m_batch() -> dict[str, torch.Tensor]:
    ids = _ids((1, 64), 50257, seed=20)
    return {"input_ids": ids, "labels": ids}


FRAME_BLOCKS = 28  # blocks of their own class: each block's forward and its resume function are 2 frames


class _Out(tuple):
    """(loss, logits) with the attribute names of a Hugging Face output (a tuple subclass Dynamo can return)."""

    def __new__(cls, loss: Any, logits: torch.Tensor) -> _Out:
        return super().__new__(cls, (loss, logits))

    @property
    def loss(self) -> Any:
        return self[0]

    @property
    def logits(self) -> torch.Tensor:
        return self[1]


def _block_classes(n: int) -> list[type]:
    """`n` residual MLP block classes, each with its own forward (a code object of its own: a frame of its own for
    Dynamo, as the distinct layer types of a real model are) and a graph break in the middle (a print, a
    data-dependent branch, a logging call in real code). Their graphs are alike: what grows is the frames. Defined
    in this module's namespace, as classes of a real model are (frames of code without a module are not cached)."""
    classes = []
    for i in range(n):
        name = f"FrameBlock{i}"
        if name not in globals():
            exec(  # noqa: S102  (a fixed template: one class per block)
                f"class {name}(torch.nn.Module):\n"
                f"    def __init__(self, dim):\n"
                f"        super().__init__()\n"
                f"        self.up = torch.nn.Linear(dim, 2 * dim)\n"
                f"        self.down = torch.nn.Linear(2 * dim, dim)\n"
                f"    def forward(self, x):\n"
                f"        h = torch.nn.functional.gelu(self.up(x))\n"
                f"        torch._dynamo.graph_break()\n"
                f"        return x + self.down(h)\n",
                globals(),
            )
        classes.append(globals()[name])
    return classes


class ManyFrames(torch.nn.Module):
    def __init__(self, blocks: int = FRAME_BLOCKS, dim: int = 32, vocab: int = 128) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(cls(dim) for cls in _block_classes(blocks))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> _Out:
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        loss = None if labels is None else torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return _Out(loss, logits)


def _many_frames() -> torch.nn.Module:
    torch.manual_seed(102)
    return ManyFrames()


SCALE = (
    ZooModel(
        "gpt2-124m",
        "GPT-2 LM head in GPT-2 small's shape (124M parameters: 12 layers, dim 768, 12 heads), batch 1x64",
        _gpt2_124m,
        _lm_124m_batch,
        lambda: {"input_ids": _ids((1, 64), 50257, seed=20)},
    ),
    ZooModel(
        "frames56",
        f"{FRAME_BLOCKS} residual MLP blocks of distinct classes, a graph break in each: {2 * FRAME_BLOCKS}+ frames",
        _many_frames,
        lambda: _lm_batch(seed=21),
        lambda: {"input_ids": _ids((2, 16), 128, seed=21)},
    ),
)
MODELS: dict[str, ZooModel] = {m.name: m for m in _ZOO}
SCALE_MODELS: dict[str, ZooModel] = {m.name: m for m in SCALE}

ITEMS = tuple(
    f"{m.name}:{w}" for m in MODELS.values() for w in WORKLOADS if w != "generate" or m.generate_inputs is not None
)
SCALE_ITEMS = tuple(f"{m.name}:{w}" for m in SCALE for w in ("train", "infer"))


def parse_items(spec: str | None) -> list[str]:
    """AOTCACHE_ZOO selection: None or "" -> CI_ITEMS; "all"; or comma-separated items, where a bare model
    name means all its workloads and a bare workload name that workload of every model ("gpt2,t5:train,generate")."""
    if not spec or spec.strip() == "ci":
        return list(CI_ITEMS)
    if spec.strip() == "all":
        return list(ITEMS)
    chosen: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part in MODELS:
            found = [i for i in ITEMS if i.startswith(part + ":")]
        elif part in WORKLOADS:
            found = [i for i in ITEMS if i.endswith(":" + part)]
        elif part in ITEMS or part in SCALE_ITEMS:
            found = [part]
        else:
            raise ValueError(f"unknown zoo item {part!r}; items: {', '.join(ITEMS)}")
        chosen += [i for i in found if i not in chosen]
    return chosen


# ---- the workloads -------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def _c(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {"grad." + n: _c(p.grad) for n, p in model.named_parameters() if p.grad is not None}


# Backends besides torch.compile's own names (bench/zoo.py's peers):
#   "eager"        no torch.compile at all: the floor a warm start is measured against
#   "aot_compile"  torch.compile(model, fullgraph=True) AOT-compiled for the item's inputs (torch's experimental
#                  aot_compile), saved to AOT_FILE by the first process and loaded by the next instead of compiling;
#                  the train and infer workloads only (fullgraph: one call of the model)
EAGER, AOT_COMPILE = "eager", "aot_compile"
AOT_FILE = "ZOO_AOT_FILE"


def _compiled(fn: Any, backend: str) -> Any:
    if backend == EAGER:
        return fn
    if backend == AOT_COMPILE:
        raise NotImplementedError("aot_compile compiles one fullgraph model call: the train and infer workloads only")
    return torch.compile(fn, backend=backend)


def _aot_compiled(model: torch.nn.Module, batch: dict[str, Any]) -> Any:
    """The model AOT-compiled for `batch` (torch._dynamo.aot_compile): loaded from $ZOO_AOT_FILE when it exists,
    else compiled and saved there."""
    from torch._dynamo.aot_compile import ModelInput

    torch._dynamo.config.enable_aot_compile = True
    path = os.environ[AOT_FILE]
    compiled = torch.compile(model, fullgraph=True)
    if os.path.exists(path):
        with open(path, "rb") as f:
            compiled._load_aot_compiled_module(f.read())
    else:
        compiled._aot_compile([ModelInput(args=(), kwargs=batch, contexts=[contextlib.nullcontext()])])
        compiled._save_aot_compiled_module(path)
    return compiled


def _model_call(model: torch.nn.Module, batch: dict[str, Any], backend: str) -> Any:
    if backend == AOT_COMPILE:
        return _aot_compiled(model, batch)(**batch)
    return _compiled(model, backend)(**batch)


def _train(spec: ZooModel, backend: str) -> Callable[[], dict[str, torch.Tensor]]:
    model, batch = spec.build().train(), spec.train_batch()

    def run() -> dict[str, torch.Tensor]:
        torch.manual_seed(1)  # dropout
        out = _model_call(model, batch, backend)
        out.loss.backward()
        return {"loss": _c(out.loss), "logits": _c(out.logits), **_grads(model)}

    return run


def _infer(spec: ZooModel, backend: str) -> Callable[[], dict[str, torch.Tensor]]:
    model, batch = spec.build().eval(), spec.infer_batch()

    def run() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            out = _model_call(model, batch, backend)
        return {"logits": _c(out.logits)}

    return run


def _adamw(spec: ZooModel, backend: str) -> Callable[[], dict[str, torch.Tensor]]:
    model, batch = spec.build().train(), spec.train_batch()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

    def run() -> dict[str, torch.Tensor]:
        torch.manual_seed(2)
        compiled, step = _compiled(model, backend), _compiled(opt.step, backend)
        result = {}
        for i in range(3):
            opt.zero_grad(set_to_none=True)
            loss = compiled(**batch).loss
            loss.backward()
            step()
            result[f"loss{i}"] = _c(loss)
        result.update({"param." + n: _c(p) for n, p in model.named_parameters()})
        return result

    return run


def _generate(spec: ZooModel, backend: str) -> Callable[[], dict[str, torch.Tensor]]:
    assert spec.generate_inputs is not None, f"{spec.name} has no generate workload"
    model, inputs = spec.build().eval(), spec.generate_inputs()

    def run() -> dict[str, torch.Tensor]:
        model.forward = _compiled(model.forward, backend)
        with torch.no_grad():
            tokens = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
        return {"tokens": tokens}

    return run


_PREPARE = {"train": _train, "infer": _infer, "adamw": _adamw, "generate": _generate}


def prepare(item: str, backend: str) -> Callable[[], dict[str, torch.Tensor]]:
    """Builds the item's model and inputs (not timed); the returned callable compiles, runs and returns the results.
    Call it inside `deterministic()`."""
    if item not in ITEMS and item not in SCALE_ITEMS:
        raise ValueError(f"unknown zoo item {item!r}; items: {', '.join(ITEMS + SCALE_ITEMS)}")
    model, workload = item.split(":")
    return _PREPARE[workload]({**MODELS, **SCALE_MODELS}[model], backend)


def run(item: str, backend: str) -> dict[str, torch.Tensor]:
    """Builds, compiles and runs one item deterministically (what the worker does, minus the measurements)."""
    with deterministic():
        return prepare(item, backend)()
