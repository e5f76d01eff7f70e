"""aotcache: a persistent cache for torch.compile's AOTAutograd + Inductor stage, on a C++ core.

    model = torch.compile(model, backend="aotcache")

Configuration: AOTCACHE_DIR, AOTCACHE_DISABLE, AOTCACHE_SALT, or `aotcache.configure(...)`.
"""

from aotcache._core import __version__
from aotcache.counters import reset as reset_stats
from aotcache.counters import snapshot as stats
from aotcache.settings import Settings, configure
from aotcache.settings import current as current_settings

__all__ = ["__version__", "Settings", "configure", "current_settings", "stats", "reset_stats", "backend"]


def __getattr__(name: str):
    # The backend imports torch; keep `import aotcache` light until it is needed.
    if name == "backend":
        from aotcache.backend import aotcache_backend

        return aotcache_backend
    raise AttributeError(name)
