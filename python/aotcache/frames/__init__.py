"""The frame cache: a warm start that skips Dynamo's tracing, soundly (on by default; AOTCACHE_FRAMES=0 or
`configure(frames=False)` turns it off).

Dynamo turns each Python frame it compiles into transformed bytecode, guards and compiled graphs. aotcache already
stores the graphs; a frame entry stores the rest, keyed by the frame's code by content (never by name and line),
and checked on load as Dynamo would check it: the inlined code's source files unchanged, every guard serialized in
full (identity guards carried as content guards) and holding for the call. Anything short of that traces as usual.

    content.py        code digests, source files of inlined code, objects guarded by identity, by content
    code_codec.py     code objects in entries (marshal, with the constants marshal cannot write)
    guards.py         identity guards -> content guards; the checks of a served frame's first call
    read_set.py       what the trace read, by content, checked when a frame loads
    process_state.py  process-wide state the trace folded into constants (distributed, autocast...), checked on load
    dynamic_state.py  Dynamo's automatic-dynamic state, carried so a served frame recompiles as a traced one would
    ddp_split.py      frames split by Dynamo's DDP optimizer
    entry.py          the entry payload format (docs/formats/frame-entry-format.md)
    verify.py         the verifier's comparison of a served candidate with Dynamo's own trace
    hooks.py          the hooks into Dynamo and the compile of one frame they run
    frame_key.py      which frames are cached, and a frame's key
    serve.py          a frame's entry read, its candidates checked, the first that holds installed
    record.py         a trace recorded as a candidate and persisted; the verifier's comparison
    counting.py       the frame cache's counters and internal errors
    guard_log.py      the guard log (a test hook)
"""

from __future__ import annotations


def enable() -> None:
    """Installs the hooks into Dynamo (once per process); frames are then cached while the setting is on."""
    from aotcache.frames import hooks

    hooks.install()
