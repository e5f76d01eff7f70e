"""The features that rest on torch's internals, and their probes: the registry every torch_glue module registers
its features into (a feature's probe lives in the module of the torch subsystem it reaches into).

A feature here is a piece of aotcache that needs private torch code: a hook installed into it, or a private function
patched while aotcache compiles. Its probe runs once per process, the first time the feature is asked for
(`resolve(name)`): it looks every internal up and checks that it still does what the feature relies on (a redirected
cache directory is where torch writes, a checkpoint policy's hash is read from its attribute, a hook point takes
the arguments the hook passes), and returns what it found for the feature to install. A torch that fails a probe
(renamed, moved or changed an internal) turns that one feature off for the process, with one WARNING naming the
feature, the torch version and what failed, and the counter `torch_internals.off.<feature>`; nothing raises into the
user's program, and every other feature is unaffected. What each feature's loss costs is in its `lost` line.

The probes check what can be checked cheaply. Two features rest on more than a probe can show, and say so:
- `light_load` replaces three torch functions by pass-throughs that take over part of their work: it also requires
  the global names those functions read to be the ones it was checked against (`LIGHT_LOAD_READS`), which holds on
  every version in `TESTED`.
- `frame_cache`: Dynamo's guard serialization is exercised by every recorded frame; a frame whose guards cannot be
  serialized is not recorded (counted), so a changed serializer costs hits, never soundness.

The cache key holds torch's version and build: a cache written by one torch is a clean miss on another. Tested
versions (docs/guide/install.md, "Supported torch versions", has the runs): `TESTED`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("aotcache")

TESTED = ("2.13.0", "2.14.1", "2.15.0")


class Mismatch(Exception):
    """An internal exists but does not behave as the feature needs (the message says how)."""


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    title: str  # how the WARNING names it
    lost: str  # what the user loses while it is off
    internals: tuple[str, ...]  # the dotted paths the probe checks (all versions in TESTED)
    probe: Callable[[], dict[str, Any]]


FEATURES: dict[str, Feature] = {}
_lock = threading.Lock()
_resolved: dict[str, dict[str, Any] | None] = {}
_reasons: dict[str, str] = {}


def feature(name: str, title: str, lost: str, internals: tuple[str, ...]) -> Callable[[Callable], Callable]:
    def register(probe: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        FEATURES[name] = Feature(name, title, lost, internals, probe)
        return probe

    return register


def resolve(name: str) -> dict[str, Any] | None:
    """The internals of feature `name` as its probe found them, or None when this torch fails the probe (the feature
    is off: one WARNING the first time). Never raises."""
    with _lock:
        if name in _resolved:
            return _resolved[name]
        feature = FEATURES[name]
        try:
            found = feature.probe()
        except Exception as e:
            found = None
            _reasons[name] = f"{type(e).__name__}: {e}"
            log.warning(
                "aotcache: %s is off: this torch (%s) fails the check of its internals (%s); %s",
                feature.title,
                torch.__version__,
                _reasons[name],
                feature.lost,
            )
            from aotcache import counters

            counters.record({f"torch_internals.off.{name}": 1}, None)
        _resolved[name] = found
        return found


def unavailable(name: str) -> str | None:
    """Why feature `name` is off in this process (after `resolve`), or None."""
    return _reasons.get(name)


def report() -> dict[str, str | None]:
    """Every feature, probed now if not yet: None where it is on, else why it is off."""
    return {name: (None if resolve(name) is not None else _reasons.get(name)) for name in FEATURES}


def signature_takes(fn: Any, what: str, *names: str) -> inspect.Signature:
    signature = inspect.signature(fn)
    missing = [n for n in names if n not in signature.parameters]
    if missing:
        raise Mismatch(f"{what} takes no {missing}")
    return signature
