"""Guarded entries of symbolic graphs: the candidate index stored under a graph's key, and guards handed to Dynamo.

A symbolic graph's key K holds an index entry (payload_kind "guard_index"): a JSON list of candidates, each the key
of one compiled artifact and the guards its compile produced. Each candidate is an ordinary entry stored under
`with_guards(K, guards)`. A lookup evaluates the candidates' guards in C++ against the actual sizes and takes the
first that holds (docs/formats/guard-format.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch

from aotcache import _core
from aotcache.capture.symbolic import SymbolTable

INDEX_KIND = "guard_index"
INDEX_VERSION = 1
# Candidates kept per key: beyond this, the oldest are dropped from the index (their entries age out by LRU).
MAX_CANDIDATES = 64


def decode_index(payload: bytes) -> list[dict[str, Any]]:
    """The candidates of an index payload; ValueError on anything malformed."""
    data = json.loads(payload.decode())
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION:
        raise ValueError(f"guard index of unknown version {data.get('version') if isinstance(data, dict) else None}")
    candidates = data.get("candidates")
    if not isinstance(candidates, list):
        raise ValueError("guard index without a candidate list")
    for c in candidates:
        if not (
            isinstance(c, dict)
            and isinstance(c.get("key"), str)
            and isinstance(c.get("guards"), list)
            and all(isinstance(g, str) for g in c["guards"])
        ):
            raise ValueError("malformed guard index candidate")
    return candidates


def encode_index(candidates: Sequence[dict[str, Any]]) -> bytes:
    return json.dumps({"version": INDEX_VERSION, "candidates": list(candidates)[-MAX_CANDIDATES:]}).encode()


def select(
    candidates: Sequence[dict[str, Any]], table: SymbolTable, required: dict[int, tuple] | None = None
) -> tuple[int | None, list[str]]:
    """(position of the first candidate whose guards all hold for the current sizes or None, reasons the others
    were rejected). A candidate whose guards do not parse is rejected, never evaluated some other way. With
    `required` ranges (mark_dynamic min/max), a candidate must also have been compiled for the whole range."""
    eligible = list(range(len(candidates)))
    reasons: list[str] = []
    if required:
        eligible = []
        for i, c in enumerate(candidates):
            uncovered = [s for s, want in required.items() if not _covers(c.get("ranges"), s, want)]
            if uncovered:
                reasons.append(f"candidate {i} was not compiled for the declared range of s{uncovered[0]}")
            else:
                eligible.append(i)
    choice, rejected = _core.select_guarded([candidates[i]["guards"] for i in eligible], table.hints())
    reasons += [
        r.replace(f"candidate {j}", f"candidate {i}", 1)
        for j, i in enumerate(eligible)
        for r in rejected
        if r.startswith(f"candidate {j}:") or r.startswith(f"candidate {j} ")
    ]
    return (eligible[choice] if choice is not None else None), reasons


def _covers(ranges: Any, symbol: int, want: tuple) -> bool:
    if not isinstance(ranges, list) or symbol >= len(ranges):
        return False
    lo, hi = ranges[symbol]
    want_lo, want_hi = want
    lower_ok = want_lo is None or lo is None or want_lo >= lo
    upper_ok = hi is None or (want_hi is not None and want_hi <= hi)  # max=None declares no upper bound
    return lower_ok and upper_ok


def install(guards: Sequence[str], table: SymbolTable) -> None:
    """Adds a loaded candidate's guards to Dynamo's ShapeEnv, as torch's own cache does on a hit: each guard is
    rebuilt from its parsed form on the current SymInts and evaluated, which records it, so Dynamo recompiles
    when a later call's sizes leave the domain the compiled code was built for."""
    symints = table.symints()
    for text in guards:
        value = _build(_core.guard_tree(text), symints)
        if isinstance(value, torch.SymBool):
            if not bool(value):  # records the guard; C++ evaluation already said it holds
                raise RuntimeError(f"guard {text} does not hold for the current sizes")
        elif not value:
            raise RuntimeError(f"guard {text} does not hold for the current sizes")


_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _build(tree: tuple, symints: Sequence[torch.SymInt]) -> Any:
    """A parsed guard (nested tuples from _core.guard_tree) as SymInt/SymBool arithmetic on the live symbols."""
    op = tree[0]
    if op == "int" or op == "bool":
        return tree[1]
    if op == "sym":
        return symints[tree[1]]
    args = [_build(t, symints) for t in tree[1:]]
    if op in _BINARY:
        return _BINARY[op](*args)
    if op == "neg":
        return -args[0]
    if op == "abs":
        return abs(args[0])
    if op == "min":
        return _fold(torch.sym_min, args)
    if op == "max":
        return _fold(torch.sym_max, args)
    if op == "not":
        return torch.sym_not(args[0])
    if op in ("and", "or"):
        from torch.fx.experimental.symbolic_shapes import sym_and, sym_or

        return (sym_and if op == "and" else sym_or)(*args)
    raise ValueError(f"guard operator {op!r} cannot be installed")


def _fold(fn: Any, args: list) -> Any:
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out
