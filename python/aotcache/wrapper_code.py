"""Compiled wrapper modules kept in graph entries: a hit runs the code object instead of compiling the source.

Loading a stored graph execs each of its Inductor wrapper modules (forward, backward), whose source torch writes out
from the payload; `compile()` of a 50-250 KB wrapper costs 15-60 ms, a few times per warm start. The compiling
process compiles the text the light load will compile (wrapper_loading.Bindings.rewrite) once more, marshals the
code and stores it in the entry's `wrapper_code` metadata field; a later load that compiles the very same text (its
SHA-256 matches) unmarshals that code instead (~0.2 ms).

Format 1 (docs/formats/wrapper-bindings.md §5): canonical JSON `{"python": <importlib MAGIC_NUMBER hex>, "version": 1,
"wrappers": {<sha256 hex of the text>: <base64 of zlib(marshal(code))>}}`, the code compiled with the file name
`<aotcache wrapper>` (the load puts the real path back into it and every nested code object). A record of another
version or Python bytecode magic, or one that does not decode, is ignored: the text is compiled as before. The record
is covered by the entry's checksum and, with a signing key, its signature, like the wrapper source in the payload.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import importlib.util
import json
import logging
import marshal
import types
import zlib
from collections.abc import Mapping

log = logging.getLogger("aotcache")

FORMAT_VERSION = 1
FILENAME = "<aotcache wrapper>"
MAGIC = importlib.util.MAGIC_NUMBER.hex()


def digest(text: str) -> str:
    """The name of a wrapper text in a record."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def compile_text(text: str, filename: str = FILENAME) -> types.CodeType:
    """How the light load compiles a wrapper text (and how a record's code is made)."""
    return compile(text, filename, "exec", dont_inherit=True)


def encode(compiled: Mapping[str, types.CodeType]) -> str | None:
    """The record of wrapper texts and their code (compiled with `compile_text(text)`), canonical JSON; None for
    none."""
    wrappers = {
        digest(text): base64.b64encode(zlib.compress(marshal.dumps(code), 6)).decode("ascii")
        for text, code in compiled.items()
    }
    if not wrappers:
        return None
    return json.dumps(
        {"python": MAGIC, "version": FORMAT_VERSION, "wrappers": wrappers}, sort_keys=True, separators=(",", ":")
    )


class Table:
    """A decoded record: the code of each wrapper text it holds, unmarshalled on demand."""

    def __init__(self, wrappers: dict[str, str]) -> None:
        self._wrappers = wrappers

    def __len__(self) -> int:
        return len(self._wrappers)

    def code_for(self, text: str, filename: str) -> types.CodeType | None:
        """The stored code of exactly `text` with `filename` as its file name, or None (not held, or undecodable)."""
        packed = self._wrappers.get(digest(text))
        if not isinstance(packed, str):
            return None
        try:
            code = marshal.loads(zlib.decompress(base64.b64decode(packed, validate=True)))
        except (ValueError, EOFError, TypeError, zlib.error, binascii.Error):
            log.debug("undecodable stored wrapper code", exc_info=True)
            return None
        if not isinstance(code, types.CodeType):
            return None
        return _renamed(code, filename)


def decode(text: object) -> Table | None:
    """None for a missing, malformed, other-version or other-Python record (the texts are compiled then)."""
    if not isinstance(text, str):
        return None
    return _decoded(text)


@functools.lru_cache(maxsize=64)
def _decoded(text: str) -> Table | None:
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("version") != FORMAT_VERSION or record.get("python") != MAGIC:
        return None
    wrappers = record.get("wrappers")
    if not isinstance(wrappers, dict):
        return None
    return Table(wrappers)


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` and its nested code objects with `filename` (tracebacks and linecache read the real wrapper file)."""
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)
