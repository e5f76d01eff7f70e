"""aotcache: a persistent cache for torch.compile's AOTAutograd + Inductor stage, on a C++ core.

    model = torch.compile(model, backend="aotcache")

Or, with no change to code that calls torch.compile with the default backend (frameworks):
    aotcache.enable()                        # or AOTCACHE_ENABLE=1, or `aotcache run -- python train.py`

Configuration: AOTCACHE_DIR, AOTCACHE_DISABLE, AOTCACHE_SALT, or `aotcache.configure(...)`.
Custom ops: `aotcache.register_op_version("ns::op", "2")` pins an op's implementation into the key.
"""

from aotcache._core import __version__
from aotcache.counters import reset as reset_stats
from aotcache.counters import snapshot as stats
from aotcache.settings import Settings, configure
from aotcache.settings import current as current_settings

__all__ = [
    "__version__",
    "Settings",
    "configure",
    "current_settings",
    "stats",
    "reset_stats",
    "aotcache_backend",
    "register_op_version",
    "unregister_op_version",
    "enable",
    "disable",
]


def __getattr__(name: str):
    # The backend imports torch; keep `import aotcache` light until it is needed. (Not named `backend`: that is the
    # submodule aotcache.backend, which shadows a package attribute of the same name once imported.)
    if name == "aotcache_backend":  # the entry point torch.compile(backend="aotcache") looks up: the activation
        from aotcache import activation
        from aotcache.backend import aotcache_backend

        activation.activate()
        return aotcache_backend
    if name in ("enable", "disable"):
        from aotcache import default_backend

        return getattr(default_backend, name)
    if name in ("register_op_version", "unregister_op_version"):
        from aotcache.capture import op_pins

        return getattr(op_pins, name)
    raise AttributeError(name)
