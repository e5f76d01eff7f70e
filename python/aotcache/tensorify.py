"""Symbolic floats: the float context a compile depends on, and Inductor's tensorify restart, recorded and replayed.

Dynamo traces a Python float that changes between calls (an LR scheduler's learning rate, a float argument, and
under `dynamic=True` every float such as LayerNorm's `eps`) as a 0-d float64 tensor input read back with `item()`:
a backed symbolic float (`zf8`). Inductor's `tensorify_python_scalars` pass, run inside AOTAutograd in Dynamo's
context, either turns every use of such a float into tensor arithmetic (the graph is compiled generic in the value,
read at run time), or marks the floats it cannot tensorify away in Dynamo's `TensorifyState` and raises
`TensorifyScalarRestartAnalysis`: Dynamo traces the frame again with those floats specialized.

What that decision depends on, beyond the graph: which of the ShapeEnv's float symbols the graph's inputs carry, and
their values where Dynamo already specialized them (rendered canonically by symbolic.SymbolTable); which of them
`TensorifyState` already marks; and whether the ShapeEnv holds unmarked float symbols no graph input carries (the
pass restarts on each). That is the `FloatContext`, keyed in the graph's key (config component `tensorify`).

A graph's float record (payload kind `float_record`, docs/formats/entry-format.md), stored under `record_key(K)`, says
what its compile did beyond an ordinary entry at K:
- `restart`: the floats it marked before raising the restart, by canonical name. A later process replays it (marks
  them, raises the restart) without tracing AOTAutograd; its retrace with the floats specialized is an ordinary
  graph that hits.
- `values`: the compile guarded on these floats' values (`Eq(2.0*zf77, 6.0)` for a float the graph returns; guards
  are integer arithmetic, so they cannot be stored as guards): each compile is stored under
  `values_key(K, floats)`, K plus those floats' exact values, and a hit installs an equality guard on each into
  Dynamo's ShapeEnv (stronger than the compile's own guard: never a wrong hit, at worst a recompile more).

Every contact with TensorifyState and the restart exception is here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import sympy

from aotcache import _core
from aotcache.capture.symbolic import SymbolTable, backed_values, is_float_symbol
from aotcache.torch_glue import dynamo as dynamo_glue

RECORD_KIND = "float_record"
RECORD_VERSION = 1
# The guard list a graph's float record is stored under (`with_guards(K, [RECORD_MARKER])`), and the prefix of the
# rows of a value-specialized entry's key: neither parses as a guard, so no guarded candidate's key is the same.
RECORD_MARKER = "symbolic floats"
VALUE_PREFIX = "float "


def _state() -> Any:
    from aotcache.torch_glue.dynamo import TensorifyState

    return TensorifyState


def _restart_class() -> type[BaseException]:
    from aotcache.torch_glue.dynamo import TensorifyScalarRestartAnalysis

    return TensorifyScalarRestartAnalysis


def is_restart(error: BaseException) -> bool:
    return isinstance(error, _restart_class())


def marked() -> frozenset[str]:
    """The float symbols Dynamo's TensorifyState marks for specialization now."""
    return frozenset(_state().force_specializations)


@dataclasses.dataclass
class FloatContext:
    """The floats of one compile: what tensorify's decision depends on, in canonical form (`rows`, keyed), and this
    process's symbol names for them (to record and replay a restart)."""

    rows: list[str]
    keyed_guards: frozenset[str]
    """Dynamo's guards on the float inputs when the graph was keyed (canonical text, in `rows`): a later trace of the
    same key makes them again; a compile's guard beyond them keys its entry by the floats' values."""
    graph_names: list[str]
    """Dynamo's name of each canonical float f0, f1, ... of the graph's inputs."""
    other_names: list[str]
    """Unmarked float symbols of the ShapeEnv that no graph input carries."""
    table: SymbolTable

    def decision(self, before: frozenset[str]) -> dict[str, Any] | None:
        """The restart the compile just raised, in canonical form; None when it marked a float this context does
        not name (it cannot be replayed: not recorded)."""
        added = marked() - before
        graph = sorted(i for i, name in enumerate(self.graph_names) if name in added)
        others = added & set(self.other_names)
        if added - {self.graph_names[i] for i in graph} - others:
            return None
        if others and others != set(self.other_names):
            return None
        return {"specialize": [f"f{i}" for i in graph], "others": bool(others)}

    def replay(self, restart: dict[str, Any]) -> BaseException:
        """Marks the restart's floats in TensorifyState, as the pass would, and returns the exception to raise."""
        state = _state()
        for name in restart["specialize"]:
            state.specialize(self.graph_names[int(name[1:])])
        if restart["others"]:
            for name in self.other_names:
                state.specialize(name)
        return _restart_class()()

    def record_key(self, key: _core.CacheKey) -> _core.CacheKey:
        return _core.with_guards(key, [RECORD_MARKER])

    def values_key(self, key: _core.CacheKey, floats: list[int]) -> _core.CacheKey:
        """K plus the exact current value of each float input named (canonical index)."""
        return _core.with_guards(key, [f"{VALUE_PREFIX}f{i} = {self._value(i).hex()}" for i in sorted(floats)])

    def install_values(self, floats: list[int]) -> None:
        """Guards each named float input's value in Dynamo's ShapeEnv (equality: the frame recompiles for another)."""
        env = self.table.shape_env
        for i in sorted(floats):
            value = self._value(i)
            if not bool(env.create_symfloatnode(self.table.float_symbols[i], hint=value) == value):
                raise RuntimeError(f"float input f{i} is not {value!r}")

    def _value(self, i: int) -> float:
        return float(backed_values(self.table.shape_env)[self.table.float_symbols[i]])


def context(table: SymbolTable | None) -> FloatContext | None:
    """The float context of a graph, or None when no float symbol is in play (the common case: nothing keyed)."""
    env = table.shape_env if table is not None and table.shape_env is not None else _ambient_shape_env()
    graph_floats = table.float_symbols if table is not None else []
    if env is None:
        return None
    state = _state()
    others = sorted(
        str(s)
        for s, v in backed_values(env).items()
        if is_float_symbol(s)
        and isinstance(v, sympy.Float)
        and s not in graph_floats
        and not state.should_specialize(str(s))
    )
    if not graph_floats and not others:
        return None
    if table is None:  # a static graph in a ShapeEnv holding floats only Dynamo's guards use
        table = SymbolTable()
        table.shape_env = env
    rows = []
    for i, sym in enumerate(graph_floats):
        value = table.render_scalar(env.replace(sym))
        rows.append(f"f{i}={value}" + (" marked" if state.should_specialize(str(sym)) else ""))
    if others:
        rows.append(f"unmarked floats of no input: {len(others)}")
    keyed: list[str] = []
    for g in env.guards:  # Dynamo's guards on the float inputs so far (`if lr > 0:` in traced code)
        expr = env.simplify(g.expr)
        if expr.free_symbols & set(graph_floats):
            text = table.render_scalar(expr)
            if text not in keyed:
                keyed.append(text)
                rows.append(f"guard {text}")
    return FloatContext(rows, frozenset(keyed), [str(s) for s in graph_floats], others, table)


def _ambient_shape_env() -> Any:
    ctx = dynamo_glue.TracingContext.try_get()
    fake_mode = getattr(ctx, "fake_mode", None)
    return getattr(fake_mode, "shape_env", None)


class Restart(Exception):
    """The compile raised tensorify's restart: `decision` (None: not recordable) is stored, `error` re-raised."""

    def __init__(self, decision: dict[str, Any] | None, error: BaseException, seconds: float) -> None:
        super().__init__("tensorify restart")
        self.decision = decision
        self.error = error
        self.seconds = seconds


def encode_record(restart: dict[str, Any] | None = None, values: list[int] | None = None) -> bytes:
    record: dict[str, Any] = {"version": RECORD_VERSION}
    if restart is not None:
        record["restart"] = restart
    else:
        record["values"] = [f"f{i}" for i in sorted(values or [])]
    return json.dumps(record, sort_keys=True).encode()


def decode_record(payload: bytes, floats: FloatContext) -> dict[str, Any]:
    """A float record, checked against this graph's floats: {"restart": {...}} or {"values": [indices]};
    ValueError when malformed or naming floats this graph does not have."""
    data = json.loads(payload.decode())
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
        raise ValueError("float record of unknown version")
    if ("restart" in data) == ("values" in data):
        raise ValueError("a float record holds either a restart or values")
    if "values" in data:
        names = data["values"]
        if not isinstance(names, list) or not names:
            raise ValueError("malformed value list")
        return {"values": [_index(name, floats) for name in names]}
    restart = data["restart"]
    if not isinstance(restart, dict) or not isinstance(restart.get("specialize"), list):
        raise ValueError("malformed restart")
    others = restart.get("others")
    if not isinstance(others, bool):
        raise ValueError("malformed restart")
    for name in restart["specialize"]:
        _index(name, floats)
    if others and not floats.other_names:
        raise ValueError("the restart marks floats of no input; this ShapeEnv has none")
    if not restart["specialize"] and not others:
        raise ValueError("the restart marks nothing")
    return {"restart": {"specialize": list(restart["specialize"]), "others": others}}


def _index(name: Any, floats: FloatContext) -> int:
    if not (isinstance(name, str) and name[:1] == "f" and name[1:].isdigit() and (name == "f0" or name[1] != "0")):
        raise ValueError(f"malformed float name {name!r}")
    i = int(name[1:])
    if i >= len(floats.graph_names):
        raise ValueError(f"the record names {name}; the graph has {len(floats.graph_names)} float inputs")
    return i
