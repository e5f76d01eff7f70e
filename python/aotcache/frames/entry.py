"""Frame entries: the payload format (docs/formats/frame-entry-format.md); the key is `_core.compute_frame_key`.

A frame entry lives in the same store as graph entries (checksummed, signed when a key is set, evicted, shared
through the remote tier), with metadata `payload_kind` = KIND. Its payload is UTF-8 JSON:

    {"format": 5, "candidates": [candidate, ...]}          newest last, at most MAX_CANDIDATES
    candidate = {
      "guards": base64 of Dynamo's pickled GuardsState (identity guards replaced by content guards, guards.py),
      "code": base64 of marshal(transformed code object) (Python version is in the key),
      "globals": {name: {"kind": "graph", "key": hex, "single": bool, "index"?: hex}
                      | {"kind": "function", "code": base64 marshal}         a resume function
                      | {"kind": "module", "name": module}                   an import alias
                      | {"kind": "builtins"}},                               Dynamo's builtins dict
      "sources": [[module, sha256 of its source file], ...],                 every module Dynamo inlined code from
      "markings": {source name: {marking attribute: [dim, ...]}},            guarded tensors' mark_dynamic & co.
      "automatic_dynamic": {source name: state},                             dynamic_state.py
      "reads": [[source name, guard kind, content digest], ...],             read_set.py: what the trace read
      "rolled_back_reads": [[source name, guard kind, content digest], ...], what the tracing attempts Dynamo
                                                                             rolled back read (classes in full)
      "facts": {name: value},                                                read_set.facts and process_state.facts:
                                                                             process-wide state (global hooks, Tensor
                                                                             methods, folded queries answered, Dynamo's
                                                                             global state, the compile state)
    }
    A load tries the candidates oldest first.

Unmarshalling and unpickling happen only after the store verified the entry (checksum, and signature when a key is
set): a frame entry carries executable bytecode.
"""

from __future__ import annotations

import base64
import json
from typing import Any

KIND = "aotcache.frame"
# 2: candidates carry "reads" and "facts" (read_set.py); 3: and "rolled_back_reads"; 4: a module's empty-hooks guards
# are one guard (guards.aotcache_empty_hooks), which an older reader could not unpickle; 5: facts carry the process
# state (process_state.py: folded queries, global state, compile state) and reads the iteration order of iterated sets
# and positionally read OrderedDicts: a format-4 candidate lacks what makes it sound. An older entry is never served.
FORMAT = 6
MAX_CANDIDATES = 16


def encode(candidates: list[dict[str, Any]]) -> bytes:
    return json.dumps({"format": FORMAT, "candidates": candidates[-MAX_CANDIDATES:]}, sort_keys=True).encode()


def decode(payload: bytes) -> list[dict[str, Any]]:
    """The candidates of a payload; ValueError when it is not a frame entry of this format."""
    try:
        doc = json.loads(payload.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"frame entry is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("candidates"), list):
        raise ValueError(f"frame entry format {doc.get('format') if isinstance(doc, dict) else '?'} is not {FORMAT}")
    return doc["candidates"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)
