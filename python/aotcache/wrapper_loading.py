"""Loading a stored graph without importing Inductor's compiler. On a hit, torch's load path imports
`torch._inductor.graph` (to read a test hook) and each generated wrapper module imports
`torch._inductor.select_algorithm` (for `extern_kernels`) and `torch._inductor.codegen.memory_planning` (for
`_align`). Those pull in lowering, the kernel templates and the code generators: about 0.3 s of a 1.1 s warm start
(docs/formats/wrapper-bindings.md has the format and the measurements).

- **Record** (after a compile, `recorded_bindings()`): the wrapper names whose objects are reachable from `torch`
  without those imports, each checked by identity in the compiling process (`extern_kernels.mm is torch.mm`,
  `memory_planning._align is torch._inductor.utils._align`). Stored as the entry's `wrapper_bindings` metadata
  field, covered by the entry's checksum and signature.
- **Load** (`loading(bindings)` around the deserialization of that entry): the wrappers' two top-level import
  statements are left out and their names bound from the record instead; `extern_kernels` is a namespace of the
  recorded kernels that looks any other name up in Inductor's own (importing it then). Torch's hit post-processing
  runs without its `torch._inductor.graph` import. Torch's own code runs instead wherever this path would differ:
  that module already imported (its test hook may be set), a Triton bundle, structured tracing, output-code
  logging, the bundled autotune cache, provenance tracking.

A loaded graph runs without importing `torch._inductor.debug` either (`_call_with`): torch's `__call__` reads that
module's recording switch at every call, which cannot be on while the module was never imported.

The three torch functions are replaced once, by pass-throughs: the loader's two take the light path only inside
`loading()` on the same thread, the call only while `torch._inductor.debug` is not imported; everywhere else they
call torch's originals. They are installed only when this torch passes the light load's check (`torch_glue`:
the functions take the arguments the pass-throughs pass and read the global names they were checked against).
`AOTCACHE_LIGHT_LOAD=0` turns the path off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import torch

from aotcache import counters, thread_state, torch_glue, wrapper_code
from aotcache.torch_glue.patching import Patches

log = logging.getLogger("aotcache")

FORMAT_VERSION = 1

# The import statements a wrapper module opens with that the record replaces: (module, name, bound as) -> the key of
# the record that binds it.
_REPLACED_IMPORTS = {
    ("torch._inductor.select_algorithm", "extern_kernels", "extern_kernels"): "extern_kernels",
    ("torch._inductor.codegen.memory_planning", "_align", "align"): "align",
}
_ALIGN_PATH = "torch._inductor.utils._align"


# The paths a record may name: a torch function, an operator packet, or `_align`. Nothing else is looked up.
_KERNEL_PATH = re.compile(r"torch\.(ops\.[A-Za-z_]\w*\.)?[A-Za-z_]\w*")


def _resolve(path: str) -> Any:
    """The object at a `torch.` path of the shapes above, by attribute lookups only (nothing imported); raises
    AttributeError."""
    if not (_KERNEL_PATH.fullmatch(path) or path == _ALIGN_PATH) or "__" in path:
        raise AttributeError(f"not a kernel path: {path!r}")
    obj: Any = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _torch_path(name: str, obj: Any) -> str | None:
    """A `torch.` path whose object is `obj` (checked by identity), or None."""
    candidates = [f"torch.{name}"]
    own_name = getattr(obj, "__name__", None)
    if isinstance(own_name, str) and own_name.isidentifier():
        candidates.append(f"torch.{own_name}")
    qualified = getattr(obj, "_qualified_op_name", None)  # an operator packet: torch.ops.<namespace>.<name>
    if isinstance(qualified, str) and qualified.count("::") == 1:
        candidates.append("torch.ops." + qualified.replace("::", "."))
    for path in candidates:
        try:
            if _resolve(path) is obj:
                return path
        except Exception:
            continue
    return None


def recorded_bindings() -> str | None:
    """The record of this process (canonical JSON), for the entry of a graph compiled in it; None when Inductor's
    modules are not loaded here (nothing to check against): such an entry loads through torch's path."""
    select_algorithm = sys.modules.get("torch._inductor.select_algorithm")
    memory_planning = sys.modules.get("torch._inductor.codegen.memory_planning")
    if select_algorithm is None or memory_planning is None:
        return None
    try:
        kernels = {}
        for name, obj in sorted(vars(select_algorithm.extern_kernels).items()):
            path = _torch_path(name, obj) if name.isidentifier() else None
            if path is not None:
                kernels[name] = path
        record: dict[str, Any] = {"version": FORMAT_VERSION, "extern_kernels": kernels}
        if getattr(memory_planning, "_align", None) is _resolve(_ALIGN_PATH):
            record["align"] = _ALIGN_PATH
        return json.dumps(record, sort_keys=True, separators=(",", ":"))
    except Exception:  # a torch whose modules have another shape: no record, torch's path
        log.debug("cannot record the wrapper bindings", exc_info=True)
        return None


class ExternKernels(types.SimpleNamespace):
    """Stands for `torch._inductor.select_algorithm.extern_kernels` in a wrapper module: the recorded kernels as
    attributes; any other name is looked up in Inductor's namespace (importing it)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from aotcache.torch_glue.inductor import extern_kernels

        return getattr(extern_kernels, name)


class Bindings:
    """A decoded record: the values that stand for the wrapper imports it covers."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    @classmethod
    def decode(cls, text: Any) -> Bindings | None:
        """None for a missing, unknown-version or unresolvable record (the entry then loads through torch's path).
        Every entry compiled under one torch carries the same record: it is decoded once per process."""
        if not isinstance(text, str):
            return None
        return _decoded(text)

    @classmethod
    def _decode(cls, text: str) -> Bindings | None:
        try:
            record = json.loads(text)
            if not isinstance(record, dict) or record.get("version") != FORMAT_VERSION:
                return None
            values: dict[str, Any] = {}
            kernels = record.get("extern_kernels")
            if isinstance(kernels, dict):
                values["extern_kernels"] = ExternKernels(
                    **{name: _resolve(path) for name, path in kernels.items() if name.isidentifier()}
                )
            if record.get("align") == _ALIGN_PATH:
                values["align"] = _resolve(_ALIGN_PATH)
            return cls(values)
        except Exception:
            log.debug("unusable wrapper bindings %r", text, exc_info=True)
            return None

    def rewrite(
        self, source: str, path: str, stored: wrapper_code.Table | None = None
    ) -> tuple[types.CodeType, dict[str, Any]] | None:
        """(code, names to bind before running it) for a wrapper's source with the covered top-level imports left
        out; None when the source has none of them. The code is the one `stored` holds for the text, else compiled.

        Without building a Python AST (an `ast.parse` of a 100 KB wrapper allocates enough objects to set off the
        garbage collector, a full collection of the whole heap once in a while): each line that reads exactly as a
        covered import becomes `del <marker>`, a name bound beforehand, and the module is compiled from text. A marker
        missing from the module code's names was inside a string literal: that line is put back and the text compiled
        again. Line numbers are kept; running the code removes the markers."""

        def code_of(text: str) -> types.CodeType:
            code = stored.code_for(text, path) if stored is not None else None
            counters.record({"wrapper_code.stored" if code is not None else "wrapper_code.compiled": 1}, None)
            return code if code is not None else wrapper_code.compile_text(text, path)

        done = self._rewrite(source, code_of)
        return None if done is None else (done[0], done[1])

    def compiled_text(self, source: str) -> tuple[str, types.CodeType] | None:
        """(the text `rewrite` compiles for this source, its code under wrapper_code's file name), or None."""
        done = self._rewrite(source, wrapper_code.compile_text)
        return None if done is None else (done[2], done[0])

    def _rewrite(self, source: str, code_of: Any) -> tuple[types.CodeType, dict[str, Any], str] | None:
        found = [m for m in _IMPORT_LINE.finditer(source) if _covered(m) in self.values]
        if not found or "__aotcache_import_" in source:
            return None
        while found:
            parts, end = [], 0
            for i, m in enumerate(found):
                parts += [source[end : m.start()], f"del __aotcache_import_{i}__"]
                end = m.end()
            parts.append(source[end:])
            text = "".join(parts)
            code = code_of(text)
            real = [m for i, m in enumerate(found) if f"__aotcache_import_{i}__" in code.co_names]
            if len(real) == len(found):
                prebound = {_bound_as(m): self.values[_covered(m)] for m in found}
                prebound.update((f"__aotcache_import_{i}__", None) for i in range(len(found)))
                return code, prebound, text
            found = real
        return None


# A covered import as a line of its own, at the left margin: `from <module> import <name>[ as <bound>]`.
_IMPORT_LINE = re.compile(r"^from[ \t]+([\w.]+)[ \t]+import[ \t]+(\w+)(?:[ \t]+as[ \t]+(\w+))?[ \t]*$", re.MULTILINE)


def _bound_as(m: re.Match[str]) -> str:
    return m.group(3) or m.group(2)


def _covered(m: re.Match[str]) -> str | None:
    return _REPLACED_IMPORTS.get((m.group(1), m.group(2), _bound_as(m)))


@functools.lru_cache(maxsize=8)
def _decoded(text: str) -> Bindings | None:
    return Bindings._decode(text)


def _pickled_global(module: str, name: str) -> bytes:
    """How pickle protocol 4 writes a reference to a module-level function: both names memoized, then STACK_GLOBAL."""
    return b"".join(b"\x8c" + bytes([len(part)]) + part.encode() + b"\x94" for part in (module, name)) + b"\x93"


_DECOMPOSITION_MODULE = "torch._inductor.decomposition"
_TORCH_DECOMPOSITIONS = _pickled_global(_DECOMPOSITION_MODULE, "select_decomp_table")
_LAZY_DECOMPOSITIONS = _pickled_global("aotcache.decomposition_lazily", "select_decomp_table")


def lazy_decompositions(payload: bytes) -> bytes:
    """Inside `loading()`: the payload with each pickled reference to torch's `select_decomp_table` (kept in the
    graphs' compile arguments, never called by a loaded graph) naming the stand-in that imports it when called
    (aotcache/decomposition_lazily.py), so that unpickling does not import `torch._inductor.decomposition`. Both
    references have the same length: the swap is in place, pickle frames unchanged. The payload as it is outside
    `loading()` or once that module is imported."""
    if _current() is None or _DECOMPOSITION_MODULE in sys.modules:
        return payload
    return payload.replace(_TORCH_DECOMPOSITIONS, _LAZY_DECOMPOSITIONS)


_active = threading.local()


@contextlib.contextmanager
def loading(bindings: Bindings | None, stored: wrapper_code.Table | None = None) -> Iterator[None]:
    """Deserializations inside take the light path on this thread (torch's path when `bindings` is None), running
    the wrapper code `stored` holds where its text matches."""
    if bindings is None or not _install():
        yield
        return
    with thread_state.set_on_thread(_active, bindings=bindings, stored=stored):
        yield


def _current() -> Bindings | None:
    return getattr(_active, "bindings", None)


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """The sources of the Python modules torch loads on this thread inside (a compile's wrappers), read as they are
    loaded; empty when this torch fails the light load's check."""
    sources: list[str] = []
    if not _install():
        yield sources
        return
    with thread_state.set_on_thread(_active, recorded=sources):
        yield sources


def recorded_code(sources: list[str], bindings_record: str | None) -> str | None:
    """The `wrapper_code` record (wrapper_code.py) for the wrappers among `sources`: the texts the light load will
    compile for them under `bindings_record`, compiled here. None when there are none or no record applies."""
    bindings = Bindings.decode(bindings_record)
    if bindings is None or not sources:
        return None
    try:
        compiled = dict(done for done in map(bindings.compiled_text, dict.fromkeys(sources)) if done is not None)
        return wrapper_code.encode(compiled)
    except Exception:  # a source that does not compile here: no record, the load compiles as torch would
        log.debug("cannot record the compiled wrapper code", exc_info=True)
        return None


_install_lock = threading.Lock()
_installed: bool | None = None


def _install() -> bool:
    """Replaces the three torch functions by pass-throughs, once; False (torch's path) when this torch fails the
    light load's check (`torch_glue`: one WARNING then)."""
    global _installed
    with _install_lock:
        if _installed is None:
            found = torch_glue.resolve("light_load")
            if found is None:
                _installed = False
                return False
            from aotcache.torch_glue.inductor import codecache, output_code

            patches = (
                Patches("light loading")
                .replace(codecache, "_reload_python_module", _reload_python_module_with(found["_reload_python_module"]))
                .replace(
                    codecache.FxGraphCache,
                    "cache_hit_post_compile",
                    staticmethod(_post_compile_with(found["FxGraphCache.cache_hit_post_compile"])),
                )
                .replace(output_code.CompiledFxGraph, "__call__", _call_with(found["CompiledFxGraph.__call__"]))
            )
            _installed = patches.install()  # all three or none (one WARNING)
        return _installed


def _reload_python_module_with(original: Any) -> Any:
    module_prefix = getattr(original, "__module__", None) or "torch._inductor.runtime.compile_tasks"

    def reload_python_module(key: str, path: str, set_sys_modules: bool = True) -> types.ModuleType:
        bindings = _current()
        if bindings is None:
            mod = original(key, path, set_sys_modules=set_sys_modules)
            recorded = getattr(_active, "recorded", None)
            if recorded is not None:
                try:
                    with open(path) as f:
                        recorded.append(f.read())
                except OSError:  # gone already: that wrapper's code is not recorded
                    pass
            return mod
        with open(path) as f:
            source = f.read()
        try:
            rewritten = bindings.rewrite(source, path, getattr(_active, "stored", None))
        except Exception:  # torch's loader reports a source that does not compile, as it always does
            rewritten = None
        if rewritten is None:
            return original(key, path, set_sys_modules=set_sys_modules)
        code, prebound = rewritten
        mod = types.ModuleType(f"{module_prefix}.{key}")
        mod.__file__ = path
        mod.key = key  # type: ignore[attr-defined]
        mod.__dict__.update(prebound)
        exec(code, mod.__dict__, mod.__dict__)
        if set_sys_modules:
            sys.modules[mod.__name__] = mod
        return mod

    reload_python_module.__wrapped__ = original  # type: ignore[attr-defined]
    reload_python_module._aotcache_replaces = original  # type: ignore[attr-defined]
    return reload_python_module


def _needs_torch_post_compile(graph: Any) -> bool:
    """Whether torch's hit post-processing does more here than loading the wrapper and applying the counters."""
    from aotcache.torch_glue.dynamo import get_metrics_context, trace_log
    from aotcache.torch_glue.inductor import codecache
    from aotcache.torch_glue.inductor import inductor_config as config

    bundle = getattr(graph, "_triton_bundle", None)
    return bool(
        (bundle is not None and (bundle.kernel_artifacts or bundle.static_autotuners))
        or trace_log.handlers
        or codecache.output_code_log.isEnabledFor(logging.DEBUG)
        or config.bundled_autotune_remote_cache
        or (get_metrics_context().in_progress() and getattr(graph, "inductor_provenance_stack_traces_str", None))
    )


def _post_compile_with(original: Any) -> Any:
    def cache_hit_post_compile(graph: Any, cache_info: Any, constants: Any) -> tuple[Any, Any]:
        if _current() is None or "torch._inductor.graph" in sys.modules or _needs_torch_post_compile(graph):
            return original(graph, cache_info, constants)
        try:
            graph.after_deserialization(constants)
        except OSError:  # the wrapper file went away underneath: torch treats this as a miss
            return None, cache_info
        from aotcache.torch_glue.dynamo import counters
        from aotcache.torch_glue.inductor import metrics

        metrics.CachedMetricsHelper.apply_deltas(graph.metrics_deltas)
        counters["inductor"] += graph.counter_deltas
        return graph, cache_info

    cache_hit_post_compile.__wrapped__ = original  # type: ignore[attr-defined]
    cache_hit_post_compile._aotcache_replaces = original  # type: ignore[attr-defined]
    return cache_hit_post_compile


_DEBUG_MODULE = "torch._inductor.debug"


def _call_with(original: Any) -> Any:
    """Torch's `CompiledFxGraph.__call__` reads `torch._inductor.debug`'s graph-execution recording switch at every
    call, so torch's hit post-processing imports that module (0.1-0.2 s with what it pulls in: functorch.compile,
    networkx). The switch is only set through that module: while it was never imported, recording is off, and this
    pass-through runs the graph as torch's `__call__` does with recording off. Whenever anything else of it could
    apply (the module imported, the profiler on, an autotune-cache bundle open for this graph), torch's runs."""
    from aotcache.torch_glue.dynamo import get_runtime_metrics_context
    from aotcache.torch_glue.inductor import AutotuneCacheBundler

    profiler = torch.autograd.profiler

    def __call__(self: Any, inputs: Any) -> Any:
        run = self.current_callable
        if (
            _DEBUG_MODULE in sys.modules
            or run is None
            or profiler._is_profiler_enabled
            or AutotuneCacheBundler.has_active_compile(self._compile_context)
        ):
            return original(self, inputs)
        try:
            return run(inputs)
        finally:
            get_runtime_metrics_context().finish()

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    __call__._aotcache_replaces = original  # type: ignore[attr-defined]
    return __call__
