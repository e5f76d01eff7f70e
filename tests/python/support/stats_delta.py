"""The change of aotcache.stats() (or any nested dict of counters) across a piece of work, for the test workers."""

from __future__ import annotations

from typing import Any


def delta(after: Any, before: Any) -> Any:
    """after - before over the numeric leaves of nested dicts; keys whose delta is 0 are left out."""
    if isinstance(after, dict):
        before = before if isinstance(before, dict) else {}
        out = {}
        for k, v in after.items():
            d = delta(v, before.get(k))
            if d not in (0, 0.0, {}, None):
                out[k] = d
        return out
    if isinstance(after, (int, float)) and not isinstance(after, bool):
        return after - (before if isinstance(before, (int, float)) else 0)
    return None
