"""Kernel binaries in entries: a hit on a machine whose Inductor cache directory lacks the graph's C++ kernels loads
the ones built by the compile instead of running the C++ compiler again.

An entry's payload holds the kernels' C++ *source*; loading it makes Inductor build each kernel it does not find at
`<Inductor cache dir>/<key[1:3]>/<key>.main.so` (the key hashes the source and the full compile command line). On a
fresh machine or container that is a g++ run per kernel plus a precompiled header, most of a remote hit's time
(docs/design/kernel-bundles.md has the measurements).

- **Capture** (on a miss, `capture()`): while aotcache compiles, every `CppCodeCache.load_async` call is recorded; its
  loader knows the files its build produces (the library, and the object files when a kernel is built in two steps).
  After the compile they are read into a kernel bundle (kernel_bundle.h, docs/formats/kernel-bundle-format.md) that
  states this machine (`machine.py`). A bundle is written only when it is complete: every file exists, lies in
  Inductor's cache directory and is within the size bound; otherwise the entry has none (counted `kernels.not_captured`)
  and a hit compiles its kernels as before.
- **Install** (on a hit, `installed()`): the entry was verified (checksum, and signature when a signing key is set)
  before any of this runs. When the bundle's machine equals this one, each missing file is written (temp file +
  rename; an existing file is never replaced) and the load runs without Inductor's precompiled header, which only a
  compile would use (a plain header stands in for it), making each distinct set of build options once instead of
  twice per kernel (`_all_kernels_present`). Another machine: nothing is written (counted `kernels.other_machine`)
  and Inductor compiles.

Off with `AOTCACHE_KERNELS=0` (`configure(kernels=False)`): nothing captured, nothing installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from aotcache import _core, counters, machine, thread_state, torch_glue
from aotcache.storage import private_files
from aotcache.torch_glue.patching import Patches

log = logging.getLogger("aotcache")

MAX_BUNDLE_BYTES = 256 << 20  # a larger set of kernels is not carried (counted `kernels.not_captured`)


def fingerprint() -> str | None:
    """This machine, as bundles state it (canonical JSON text); None where it cannot be told."""
    described = machine.describe()
    return None if described is None else json.dumps(described, sort_keys=True, separators=(",", ":"))


def _inductor_dir() -> str:
    from aotcache.torch_glue.inductor import cache_dir

    return os.path.realpath(cache_dir())


def _build_outputs(loader: Any) -> list[str] | None:
    """The files the build behind one `load_async` result produces, from its closure (torch 2.13's
    `CppCodeCache.load_async`: `worker_fn = partial(_worker_compile_cpp, lock_path, builders)`); None when the
    closure does not have that shape (another torch): then no bundle."""
    code = getattr(loader, "__code__", None)
    closure = getattr(loader, "__closure__", None)
    if code is None or closure is None or "worker_fn" not in code.co_freevars:
        return None
    worker_fn = closure[code.co_freevars.index("worker_fn")].cell_contents
    args = getattr(worker_fn, "args", None)
    if not isinstance(args, tuple) or len(args) != 2 or not isinstance(args[1], (tuple, list)):
        return None
    try:
        return [str(builder.get_target_file_path()) for builder in args[1]]
    except Exception:
        return None


class Capture:
    """The kernels one compile loaded; `bundle()` after the compile."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.unavailable = False  # the recording hook could not be installed: kernels were not seen
        self.loaders: list[Any] = []

    def bundle(self) -> tuple[bytes, str | None]:
        """(bundle bytes, None), or (b"", why there is none)."""
        if not self.enabled:
            return b"", None
        if self.unavailable:
            return b"", "capture_unavailable"
        if not self.loaders:
            return b"", None  # no C++ kernel (or all inlined): nothing to carry, nothing missing
        fp = fingerprint()
        if fp is None:
            return b"", "machine_unknown"
        root = _inductor_dir()
        files: dict[str, bytes] = {}
        total = 0
        for loader in self.loaders:
            outputs = _build_outputs(loader)
            if outputs is None:
                return b"", "loader_unrecognized"
            for path in outputs:
                real = os.path.realpath(path)
                rel = os.path.relpath(real, root)
                if rel.startswith("..") or os.path.isabs(rel):
                    return b"", "outside_inductor_dir"
                if rel in files:
                    continue
                try:
                    with open(real, "rb") as f:
                        data = f.read(MAX_BUNDLE_BYTES + 1)
                except OSError:
                    return b"", "file_missing"
                total += len(data)
                if total > MAX_BUNDLE_BYTES:
                    return b"", "too_large"
                files[rel] = data
        try:
            return _core.encode_kernel_bundle(fp, sorted(files.items())), None
        except _core.CacheError as e:  # a file name the format does not carry
            log.info("kernels not carried: %s", e)
            return b"", "path_refused"


@contextlib.contextmanager
def capture(enabled: bool = True) -> Iterator[Capture]:
    """Records the C++ kernels Inductor loads on this thread while in force (one compile). The recording hook is a
    pass-through installed once in `CppCodeCache.load_async` (swapping it in and out around each compile, two
    threads compiling at once could leave it swapped, recording into a finished capture for good); it records only
    for the thread's innermost capture, so a compile on another thread adds nothing to this one's kernels."""
    cap = Capture(enabled)
    if not enabled:
        yield cap
        return
    if not _install_hooks():
        cap.unavailable = True
        yield cap
        return
    with thread_state.set_on_thread(_capturing, cap=cap):
        yield cap


_capturing = threading.local()


def _recording(original: Any) -> Any:
    """The classmethod `original` (Inductor's `load_async`), recording each loader it returns into the thread's
    capture, if any."""

    def load_async(cls: Any, *args: Any, **kwargs: Any) -> Any:
        loader = original.__func__(cls, *args, **kwargs)
        cap = getattr(_capturing, "cap", None)
        if cap is not None:
            cap.loaders.append(loader)
        return loader

    load_async._aotcache_replaces = original  # type: ignore[attr-defined]
    return classmethod(load_async)


@contextlib.contextmanager
def installed(bundle: bytes, enabled: bool = True) -> Iterator[dict[str, int]]:
    """Installs the entry's kernels (verified entry only) before a load in force; yields the counters to record.
    Never raises for the bundle's own faults: the load then compiles what is missing, as without a bundle."""
    delta: dict[str, int] = {}
    if not enabled or not bundle:
        yield delta
        return

    complete = False
    try:
        built_on, files = _core.kernel_bundle_contents(bundle)
        if built_on != fingerprint():
            delta["kernels.other_machine"] = 1
        else:
            new, present = _core.install_kernel_bundle(bundle, _inductor_dir())
            complete = True
            if new:
                delta["kernels.installed"] = new
            if present:
                delta["kernels.present"] = present
    except _core.CacheError as e:
        delta["kernels.install_failed"] = 1
        counters.warn_once("kernels_install", "could not install an entry's kernels, they are compiled: %s", e)
    if not complete:
        yield delta
        return
    with _all_kernels_present():
        yield delta


# ---- a load whose kernels are all present ---------------------------------------------------------------------------
# Every kernel file of the entry exists, so Inductor compiles nothing. Two of its steps then only cost time:
# - its precompiled header, which it asks for before it looks for the kernel and only a compile would use: building
#   it costs a g++ preprocess per process and a whole header build (~8 s) on a new machine. It gets a plain header
#   that includes the real one instead (what g++ falls back to anyway), so a kernel that had to be compiled after
#   all (another command line on this machine) is still correct. The header's path enters the build command only,
#   never a kernel's path (Inductor hashes the command line before it adds the header).
# - its build options, made afresh for each kernel to hash the command line into the kernel's path (include and
#   library paths, the Python and OpenMP settings), twice per kernel (T5's 57 kernels: 0.08 s of a 0.75 s warm
#   start). Within one graph's load they are made once per distinct set of arguments, then copied: the arguments,
#   Inductor's config and the environment they are made from do not change inside a load (T5: 0.04 s left, most of
#   it the process's first set, which fills torch's own caches).
# Both are pass-throughs installed once in Inductor's module (never swapped in and out, which two threads loading at
# once could leave swapped): they take these paths only inside `_all_kernels_present()`, on the same thread.
_present = threading.local()


@contextlib.contextmanager
def _all_kernels_present() -> Iterator[None]:
    if not _install_hooks():
        yield
        return
    with thread_state.set_on_thread(_present, options={}):
        yield


_hooks_lock = threading.Lock()
_hooks: bool | None = None


def _install_hooks() -> bool:
    """Installs the three pass-throughs into Inductor's codecache once (the capture's recording `load_async`, the
    load's plain header and reused build options), all or none; False where this torch fails the feature's check
    (`torch_glue`, feature `kernel_bundles`: one WARNING): nothing is captured, loads take torch's path."""
    global _hooks
    with _hooks_lock:
        if _hooks is None:
            found = torch_glue.resolve("kernel_bundles")
            if found is None:
                _hooks = False
                return _hooks
            codecache = found["codecache"]
            cache = codecache.CppCodeCache
            try:
                patches = (
                    Patches("kernel bundles")
                    .replace(cache, "load_async", _recording(cache.__dict__["load_async"]))
                    .replace(codecache, "_precompile_header", _plain_header_with(codecache._precompile_header))
                    .replace(codecache, "CppTorchDeviceOptions", _reused_options_with(codecache.CppTorchDeviceOptions))
                )
            except Exception:  # a pass-through that cannot be built around this torch's function: none installed
                log.warning("aotcache: kernel bundles are off: their hooks could not be built", exc_info=True)
                patches = None
            _hooks = patches is not None and patches.install()  # all three or none (one WARNING)
        return _hooks


def _plain_header_with(real: Any) -> Any:
    def precompile_header(header: str, hashable_cmd_line: str, **compile_command: Any) -> str:
        if getattr(_present, "options", None) is None:
            return real(header, hashable_cmd_line, **compile_command)
        root = os.path.join(_inductor_dir(), "aotcache-headers")
        path = os.path.join(root, hashlib.sha256(header.encode()).hexdigest()[:32] + ".h")
        if not os.path.exists(path):
            private_files.write_atomic(path, f"#include <{header}>\n")
        return path

    precompile_header._aotcache_replaces = real  # type: ignore[attr-defined]
    return precompile_header


def _reused_options_with(real: type) -> Any:
    def options(*args: Any, **kwargs: Any) -> Any:
        made = getattr(_present, "options", None)
        if made is None or args:
            return real(*args, **kwargs)
        try:
            key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items()))
            made_before = made.get(key)
        except TypeError:  # an argument that cannot be a key
            return real(**kwargs)
        if made_before is None:
            made_before = made[key] = real(**kwargs)
        return _copied(made_before)

    options._aotcache_replaces = real  # type: ignore[attr-defined]
    return options


def _copied(options: Any) -> Any:
    """A copy of a build options object that shares no list with it (Inductor sets a copy's precompiled header)."""
    import copy

    new = copy.copy(options)
    for name, value in vars(new).items():
        if isinstance(value, list):
            setattr(new, name, list(value))
    return new
