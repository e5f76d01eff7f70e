"""A stand-in for `torch._inductor.decomposition.select_decomp_table` in graphs loaded through the light path.

A compiled graph keeps the arguments it was compiled with (`fx_kwargs`), among them that function, so unpickling a
stored graph imports `torch._inductor.decomposition` (0.05-0.1 s of a warm start) although a loaded graph never
calls it. The light path loads the graph with this function in its place (wrapper_loading.lazy_decompositions):
calling it imports torch's and returns its result. This module's name is part of the stored format's reading rules:
it has the length of torch's (29 characters), so the pickled reference is swapped in place
(docs/formats/wrapper-bindings.md).
"""

from __future__ import annotations

from typing import Any


def select_decomp_table() -> dict[Any, Any]:
    """What torch's `select_decomp_table()` returns."""
    from aotcache.torch_glue.inductor import select_decomp_table as torchs

    return torchs()
