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
        self.float_symbols: list[sympy.Symbol] = []  # Dynamo's float symbols of the inputs (tensorify.py), canonical
        self._float_canonical: dict[sympy.Symbol, sympy.Symbol] = {}
        self.shape_env: Any = None

    def __bool__(self) -> bool:
        """Whether the graph has symbolic sizes (float symbols alone do not make guards to select on)."""
        return bool(self.symbols)

    def _same_env(self, shape_env: Any, what: str) -> None:
        if self.shape_env is None:
            self.shape_env = shape_env
        elif shape_env is not self.shape_env:
            raise Bypass("dynamic_shapes", f"{what} belongs to another ShapeEnv")

    def add(self, value: torch.SymInt, what: str) -> None:
        node = value.node
        self._same_env(node.shape_env, what)
        for sym in sorted(node.expr.free_symbols, key=lambda s: str(node.expr).find(str(s))):
            if sym not in self._canonical:
                if not str(sym).startswith("s"):  # unbacked (u0) or other kinds: no hint to evaluate guards on
                    raise Bypass("dynamic_shapes", f"{what} uses the unbacked symbol {sym}")
                self._canonical[sym] = sympy.Symbol(f"s{len(self.symbols)}", integer=True)
                self.symbols.append(sym)

    def add_float(self, value: torch.SymFloat, what: str) -> None:
        """A float input: Dynamo's 0-d float64 tensor whose `item()` is the backed float symbol `value` was made
        from (its `_expr`, before any specialization replaced it). Canonical names f0, f1, ... by first appearance."""
        node = value.node
        self._same_env(node.shape_env, what)
        sym = node._expr
        if not (isinstance(sym, sympy.Symbol) and is_float_symbol(sym) and sym in backed_values(node.shape_env)):
            raise Bypass("dynamic_shapes", f"{what} is a float of no backed symbol ({sym})")
        if sym not in self._float_canonical:
            self._float_canonical[sym] = sympy.Symbol(f"f{len(self.float_symbols)}", real=True)
            self.float_symbols.append(sym)

    def render_scalar(self, value: Any) -> str:
        """The canonical text of a SymFloat/SymInt/SymBool or sympy expression over size and float symbols, each
        float constant written exactly (`float.hex`: sympy prints 15 digits, which two floats can share)."""
        expr = value.node.expr if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) else value
        expr = sympy.sympify(expr)
        missing = expr.free_symbols - self._canonical.keys() - self._float_canonical.keys()
        if missing:
            raise Bypass("dynamic_shapes", f"expression {expr} uses symbols {sorted(map(str, missing))} of no input")
        exact = {a: sympy.Symbol(f"float({float(a).hex()})") for a in expr.atoms(sympy.Float)}
        return str(expr.xreplace({**self._canonical, **self._float_canonical, **exact}))

    def knows(self, symbols: set) -> bool:
        """Whether every symbol is one of the graph inputs' sizes or floats."""
        return set(symbols) <= (self._canonical.keys() | self._float_canonical.keys())

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
        return [self._hint(s) for s in self.symbols]

    def symints(self) -> list[torch.SymInt]:
        """One SymInt per canonical symbol, for installing guards into the ShapeEnv."""
        return [self.shape_env.create_symintnode(s, hint=self._hint(s)) for s in self.symbols]

    def _hint(self, sym: sympy.Symbol) -> int:
        return int(backed_values(self.shape_env)[sym])


def backed_values(shape_env: Any) -> dict:
    """The ShapeEnv's hint of each backed symbol. torch 2.13 keeps them in backed_var_to_val (var_to_val is
    deprecated and warns)."""
    return shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val


def is_float_symbol(sym: Any) -> bool:
    from aotcache.torch_glue.dynamo import SymT, symbol_is_type

    return isinstance(sym, sympy.Symbol) and symbol_is_type(sym, SymT.FLOAT)


def placeholder_values(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any] | None:
    """The placeholders' fake example values (Dynamo's), or None when they do not match the inputs one to one."""
    values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return values if len(values) == len(example_inputs) else None


def symbolic_placeholders(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any] | None:
    """Placeholders' fake example values when the graph has symbolic sizes or float inputs, else None (a static
    graph)."""
    values = placeholder_values(gm, example_inputs)
    if values is None:
        return None
    symbolic = any(isinstance(x, torch.SymInt) for x in example_inputs) or any(
        isinstance(v, torch.Tensor) and (_is_symbolic_tensor(v) or _float_memo(v) is not None) for v in values
    )
    return values if symbolic else None


def _float_memo(v: torch.Tensor) -> torch.SymFloat | None:
    """The symbolic float a Dynamo float input stands for (its memoized `item()`), else None."""
    memo = getattr(v, "item_memo", None)
    return memo if isinstance(memo, torch.SymFloat) else None


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
            memo = _float_memo(v)
            if memo is not None:
                table.add_float(memo, f"input {i}")
        elif isinstance(v, (torch.SymFloat, torch.SymBool)):
            raise Bypass("dynamic_shapes", f"input {i} is a symbolic {type(v).__name__}")
    return table


def finite_bound(bound: Any) -> int | None:
    """A value-range bound as an int, or None when it is unbounded. Torch's integer infinities (`int_oo`, `-int_oo`)
    claim `is_finite` (they are sympy Integers to keep range arithmetic integral), so finiteness is decided by what
    the bound is, not by that flag: only a plain sympy Integer or Python int is a bound."""
    if isinstance(bound, bool):
        return None
    if isinstance(bound, int):
        return bound
    if isinstance(bound, sympy.Integer) and type(bound).__module__.startswith("sympy."):
        return int(bound)
    return None


def symbol_ranges(table: SymbolTable) -> list[list[int | None]]:
    """[lower, upper] of each canonical symbol in the ShapeEnv now (None: unbounded on that side)."""
    out: list[list[int | None]] = []
    for sym in table.symbols:
        r = table.shape_env.var_to_range.get(sym)
        out.append([finite_bound(r.lower), finite_bound(r.upper)] if r is not None else [None, None])
    return out


def required_ranges(example_inputs: Sequence[Any], fakes: Sequence[Any], table: SymbolTable) -> dict[int, tuple]:
    """Ranges the user declared with mark_dynamic(min=, max=), by canonical symbol: Dynamo raises unless the graph
    is valid on the whole range, so only a candidate compiled for (at least) that range may serve it."""
    required: dict[int, tuple] = {}
    for x, fake in zip(example_inputs, fakes):
        declared = getattr(x, "_dynamo_dynamic_range", None) if isinstance(x, torch.Tensor) else None
        if not declared or not isinstance(fake, torch.Tensor):
            continue
        for r in declared:
            if r.min is None and r.max is None:  # mark_dynamic without bounds: no range to honour
                continue
            size = fake.shape[r.dim]
            if isinstance(size, torch.SymInt) and size.node.expr in table._canonical:
                index = table.symbols.index(size.node.expr)
                required[index] = (r.min, r.max)
    return required


def _has_infinity(expr: Any) -> bool:
    return any(
        a.is_infinite or (isinstance(a, sympy.Integer) and finite_bound(a) is None) for a in expr.atoms(sympy.Number)
    )


def compile_guards(
    table: SymbolTable, float_guarded: set[int] | None = None, keyed_float_guards: frozenset[str] = frozenset()
) -> list[str]:
    """The guards the ShapeEnv holds on the graph's symbols after a compile, canonical text, in a stable order:
    every guard whose symbols are all inputs' (what Dynamo traced under and what the compile assumed), then each
    symbol's value range (0/1 specialization gives `2 <= s0`; compiles may narrow it).

    Guards are integer arithmetic (docs/formats/guard-format.md). A guard on a float input's value (`Eq(2.0*zf77, 6.0)`:
    the compile baked the value in) raises Bypass, unless `float_guarded` is given and the guard is over float inputs
    alone: the canonical index of each such float is added to it (tensorify.py keys the entry by their values).
    Guards in `keyed_float_guards` (canonical text: Dynamo's own, made while tracing and keyed) are skipped."""
    env = table.shape_env
    guards: list[str] = []
    seen: set[str] = set()
    wanted = set(table.symbols)
    for g in env.guards:
        expr = env.simplify(g.expr)  # applies replacements: a symbol found equal to an input's is renamed to it
        if expr is sympy.true or not expr.free_symbols:
            continue
        floats = [table.float_symbols.index(s) for s in expr.free_symbols if s in table._float_canonical]
        if floats:
            if table.render_scalar(expr) in keyed_float_guards:
                continue
            if float_guarded is None or not all(s in table._float_canonical for s in expr.free_symbols):
                raise Bypass("dynamic_shapes", f"a guard ({expr}) on a symbolic float input")
            float_guarded.update(floats)
            continue
        if all(is_float_symbol(s) for s in expr.free_symbols):
            # Dynamo's own guard on a float it specialized (`Eq(zf41, 1.0e-5)`): the graph holds the constant, not
            # the symbol, and the frame's guards check it.
            continue
        if not expr.free_symbols <= wanted:
            # The compile assumed something about a size no input carries: the guards could not be checked.
            raise Bypass("dynamic_shapes", f"a guard ({expr}) involves symbols of no graph input")
        if _has_infinity(expr):
            # Written down, it would not parse as a guard (and mean nothing to evaluate): keep the compile, do not
            # store it rather than store a candidate no lookup could select.
            raise Bypass("dynamic_shapes", f"a guard ({expr}) involves an infinite bound")
        text = table.render(expr)
        if text not in seen:
            seen.add(text)
            guards.append(text)
    for i, (lo, hi) in enumerate(symbol_ranges(table)):
        if lo is not None:
            guards.append(f"{lo} <= s{i}")
        if hi is not None:
            guards.append(f"s{i} <= {hi}")
    return guards
