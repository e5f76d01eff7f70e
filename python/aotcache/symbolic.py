"""Dynamic shapes: the graph's size symbols in canonical form, and the guards a compile produced on them.

Dynamo names size symbols after their sources (`s77`); the key must not depend on that, so symbols are renumbered
`s0, s1, ...` by first appearance in the graph inputs (placeholders in order; a tensor's sizes, then strides, then
storage offset). Expressions are rendered with sympy's printer over the renamed symbols: the same text in every
process. Guards are stored as that text and parsed and evaluated in C++ (src/guard); nothing here evaluates text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
import torch.fx

from aotcache.errors import Bypass


class SymbolTable:
    """The canonical symbols of one graph, their example values (hints), and the ShapeEnv they live in."""

    def __init__(self) -> None:
        self.symbols: list[sympy.Symbol] = []  # Dynamo's symbols, in canonical order
        self._canonical: dict[sympy.Symbol, sympy.Symbol] = {}
        self.shape_env: Any = None

    def __bool__(self) -> bool:
        return bool(self.symbols)

    def add(self, value: torch.SymInt, what: str) -> None:
        node = value.node
        if self.shape_env is None:
            self.shape_env = node.shape_env
        elif node.shape_env is not self.shape_env:
            raise Bypass("dynamic_shapes", f"{what} belongs to another ShapeEnv")
        for sym in sorted(node.expr.free_symbols, key=lambda s: str(node.expr).find(str(s))):
            if sym not in self._canonical:
                if not str(sym).startswith("s"):  # unbacked (u0) or other kinds: no hint to evaluate guards on
                    raise Bypass("dynamic_shapes", f"{what} uses the unbacked symbol {sym}")
                self._canonical[sym] = sympy.Symbol(f"s{len(self.symbols)}", integer=True)
                self.symbols.append(sym)

    def render(self, value: Any) -> str:
        """The canonical text of a SymInt, sympy expression or int."""
        if isinstance(value, int):
            return str(value)
        expr = value.node.expr if isinstance(value, torch.SymInt) else value
        missing = expr.free_symbols - self._canonical.keys()
        if missing:
            raise Bypass("dynamic_shapes", f"expression {expr} uses symbols {sorted(map(str, missing))} of no input")
        return str(expr.xreplace(self._canonical))

    def hints(self) -> list[int]:
        """The current value of each canonical symbol."""
        return [int(self.shape_env.var_to_val[s]) for s in self.symbols]

    def symints(self) -> list[torch.SymInt]:
        """One SymInt per canonical symbol, for installing guards into the ShapeEnv."""
        return [self.shape_env.create_symintnode(s, hint=int(self.shape_env.var_to_val[s])) for s in self.symbols]


def symbolic_placeholders(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any] | None:
    """Placeholders' fake example values when the graph has symbolic sizes, else None (a static graph)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("example_value") for n in placeholders]
    if len(values) != len(example_inputs):
        return None
    symbolic = any(isinstance(x, torch.SymInt) for x in example_inputs) or any(
        isinstance(v, torch.Tensor) and _is_symbolic_tensor(v) for v in values
    )
    return values if symbolic else None


def _is_symbolic_tensor(t: torch.Tensor) -> bool:
    return t._has_symbolic_sizes_strides or isinstance(t.storage_offset(), torch.SymInt)


def build_table(fakes: Sequence[Any]) -> SymbolTable:
    table = SymbolTable()
    for i, v in enumerate(fakes):
        if isinstance(v, torch.SymInt):
            table.add(v, f"input {i}")
        elif isinstance(v, torch.Tensor):
            for d in (*v.shape, *v.stride(), v.storage_offset()):
                if isinstance(d, torch.SymInt):
                    table.add(d, f"input {i}")
        elif isinstance(v, (torch.SymFloat, torch.SymBool)):
            raise Bypass("dynamic_shapes", f"input {i} is a symbolic {type(v).__name__}")
    return table


def compile_guards(table: SymbolTable) -> list[str]:
    """The guards the ShapeEnv holds on the graph's symbols after a compile, canonical text, in a stable order:
    every guard whose symbols are all inputs' (what Dynamo traced under and what the compile assumed), then each
    symbol's value range (0/1 specialization gives `2 <= s0`; compiles may narrow it)."""
    env = table.shape_env
    guards: list[str] = []
    seen: set[str] = set()
    wanted = set(table.symbols)
    for g in env.guards:
        expr = env.simplify(g.expr)
        if expr is sympy.true or not expr.free_symbols or not expr.free_symbols <= wanted:
            continue
        text = table.render(expr)
        if text not in seen:
            seen.add(text)
            guards.append(text)
    for i, sym in enumerate(table.symbols):
        r = env.var_to_range.get(sym)
        if r is None:
            continue
        if r.lower.is_finite:
            guards.append(f"{int(r.lower)} <= s{i}")
        if r.upper.is_finite:
            guards.append(f"s{i} <= {int(r.upper)}")
    return guards
