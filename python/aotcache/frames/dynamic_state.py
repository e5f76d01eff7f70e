"""Dynamo's automatic-dynamic state of a frame, carried in a frame entry so that a frame served from the cache leaves
the state a trace would have left.

Dynamo remembers, per code object, the sizes, strides and int values each input had when it was traced
(torch._dynamo.pgo, CodeState.automatic_dynamic); when a later trace of the same code sees a different value, it
makes that value symbolic. A frame served from the frame cache is not traced, so without this the next trace (after a
guard failure) would not know the earlier values and would compile a static graph first, then a symbolic one: one
compile more than the process that recorded the frames. The recording process's state after the trace is stored
with the candidate (JSON, below) and merged (Dynamo's own join) into the loading process's state on a hit.

Encoding of one entry: {"scalar": A, "size": T, "stride": T, "excluded_sizes": [int|null...]|null,
"excluded_scalar": int|null}, where an atom A is a number or boolean (JSON's own; a float's exact value round-trips),
"?" (dynamic) or null (unset), and T is "?", null or a list of atoms, where a stride atom may also be
{"infer": dim}.
"""

from __future__ import annotations

import types
from typing import Any

DYNAMIC = "?"


def _atom_out(value: Any) -> Any:
    from aotcache.torch_glue.dynamo import pgo

    if value is pgo.auto_dynamic:
        return DYNAMIC
    if value is pgo.auto_unset:
        return None
    if isinstance(value, pgo.InferStride):
        return {"infer": value.dim}
    if type(value) in (int, float, bool):  # a scalar input's value: an int, or a float or bool Dynamo specialized on
        return value
    raise TypeError(f"unexpected automatic-dynamic atom {value!r}")


def _atom_in(value: Any) -> Any:
    from aotcache.torch_glue.dynamo import pgo

    if value == DYNAMIC:
        return pgo.auto_dynamic
    if value is None:
        return pgo.auto_unset
    if isinstance(value, dict) and type(value.get("infer")) is int:
        return pgo.InferStride(value["infer"])
    if type(value) in (int, float, bool):
        return value
    raise ValueError(f"bad automatic-dynamic atom {value!r}")


def _tuple_out(value: Any) -> Any:
    return [_atom_out(v) for v in value] if isinstance(value, tuple) else _atom_out(value)


def _tuple_in(value: Any) -> Any:
    return tuple(_atom_in(v) for v in value) if isinstance(value, list) else _atom_in(value)


def _ints_or_none(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or not all(v is None or type(v) is int for v in value):
        raise ValueError(f"bad excluded sizes {value!r}")
    return tuple(value)


def encode_entry(e: Any) -> dict[str, Any]:
    return {
        "scalar": _atom_out(e.scalar),
        "size": _tuple_out(e.size),
        "stride": _tuple_out(e.stride),
        "excluded_sizes": list(e.excluded_sizes) if e.excluded_sizes is not None else None,
        "excluded_scalar": e.excluded_scalar,
    }


def decode_entry(doc: dict[str, Any]) -> Any:
    from aotcache.torch_glue.dynamo import pgo

    scalar = doc.get("excluded_scalar")
    if scalar is not None and type(scalar) is not int:
        raise ValueError(f"bad excluded scalar {scalar!r}")
    return pgo.FrameStateSizeEntry(
        scalar=_atom_in(doc["scalar"]),
        size=_tuple_in(doc["size"]),
        stride=_tuple_in(doc["stride"]),
        excluded_sizes=_ints_or_none(doc.get("excluded_sizes")),
        excluded_scalar=scalar,
    )


def _code_state(code: types.CodeType, closure: tuple | None) -> Any:
    from aotcache.torch_glue.dynamo import pgo

    return pgo.get_code_state()[pgo.CodeId.make(code, closure)]


def snapshot(code: types.CodeType, closure: tuple | None) -> dict[str, Any]:
    """The automatic-dynamic state Dynamo holds for this code now, encoded."""
    state = _code_state(code, closure)
    return {name: encode_entry(e) for name, e in sorted(state.automatic_dynamic.items())}


def decode(doc: Any) -> dict[str, Any]:
    """Decoded entries of a snapshot; ValueError when it is malformed."""
    if not isinstance(doc, dict):
        raise ValueError("automatic-dynamic state is not an object")
    return {str(name): decode_entry(e) for name, e in doc.items()}


def merge(code: types.CodeType, closure: tuple | None, entries: dict[str, Any]) -> None:
    """Joins decoded `entries` into this process's state for the code, as a trace would have (Dynamo's join when
    automatic_dynamic_shapes is on, an overwrite when it is off)."""
    from aotcache.torch_glue.dynamo import dynamo_config

    state = _code_state(code, closure)
    for name, e in entries.items():
        if dynamo_config.automatic_dynamic_shapes:
            state.automatic_dynamic[name] |= e
        else:
            state.automatic_dynamic[name] = e
