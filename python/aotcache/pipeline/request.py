"""CompileRequest: everything one compile carries through the pipeline's phases (pipeline/__init__.py), built once
at its start: the graph and its inputs, the settings, the tiered store, the phase reached and its timings; the key,
the entry and the outcome as the phases fill them in."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import torch

from aotcache import _core
from aotcache.settings import Settings
from aotcache.storage.tiered import TieredStore


@dataclasses.dataclass
class Timings:
    """perf_counter() marks of one compile (0.0 until reached)."""

    start: float = dataclasses.field(default_factory=time.perf_counter)
    key: float = 0.0


@dataclasses.dataclass
class CompileRequest:
    gm: torch.fx.GraphModule
    example_inputs: Sequence[Any]
    options: dict[str, Any]
    """Inductor options (mode and options of torch.compile), as compile_fx takes them."""
    settings: Settings
    """The settings snapshot of this compile: read once, passed down."""
    tiers: TieredStore | None = None
    """None when the cache directory cannot be used (the compile goes on without the cache)."""
    phase: str = "start"
    """The phase running now: an unexpected exception is counted under it."""
    timings: Timings = dataclasses.field(default_factory=Timings)
    entry_key: str | None = None
    """The key of the stored entry the returned callable is the artifact of (a hit's, a stored miss's): what a
    frame entry references (frames/)."""
    index_key: str | None = None
    mesh_coordinate: bool = False
    """For a DTensor graph: whether its key holds the rank's mesh coordinate (capture/distributed_tensor.py)."""
    """For a symbolic graph: the key of its guard index, which a frame serving `entry_key` keeps fresh for eviction."""

    @property
    def local(self) -> _core.LocalStore | None:
        return self.tiers.local if self.tiers is not None else None

    def enter(self, phase: str) -> None:
        self.phase = phase


@dataclasses.dataclass
class Symbolic:
    """A graph with symbolic sizes: Dynamo's fake placeholders, its canonical symbols, declared ranges."""

    fakes: list[Any]
    table: Any  # symbolic.SymbolTable
    required: dict[int, tuple]


@dataclasses.dataclass
class Keyed:
    """The result of capture -> check -> key: what lookup and persist need."""

    key: _core.CacheKey
    graph: _core.Graph
    inputs: list[Any]
    symbolic: Symbolic | None = None
    floats: Any = None
    """tensorify.FloatContext when symbolic floats are in play (the compile then runs in Dynamo's ShapeEnv)."""
