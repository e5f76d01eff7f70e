"""Type stubs of aotcache._core, the nanobind extension over the C++ core."""

from typing import Any

__version__: str
KEY_SCHEMA_VERSION: int
ENTRY_FORMAT_VERSION: int

class CacheError(RuntimeError): ...
class CorruptEntryError(CacheError): ...
class IncompatibleEntryError(CacheError): ...
class CacheIOError(CacheError): ...
class UnencodableError(CacheError): ...

class NodeRef:
    position: int
    def __init__(self, position: int) -> None: ...

class TorchEnum:
    category: str
    name: str
    def __init__(self, category: str, name: str) -> None: ...

class Slice:
    def __init__(self, start: Any, stop: Any, step: Any) -> None: ...

class EllipsisTag:
    def __init__(self) -> None: ...

class TensorMeta:
    dtype: str
    sizes: list[int]
    requires_grad: bool
    def __init__(
        self,
        dtype: str,
        device: str,
        sizes: list[int],
        strides: list[int],
        storage_offset: int = 0,
        requires_grad: bool = False,
        layout: str = "strided",
        is_pinned: bool = False,
        tensor_type: str = "Tensor",
        is_inference: bool = False,
    ) -> None: ...

class Graph:
    def __init__(self) -> None: ...
    def add_node(
        self,
        name: str,
        op: str,
        target_kind: str,
        target: str,
        args: tuple[Any, ...] | list[Any],
        kwargs: dict[str, Any],
        constant_meta: TensorMeta | None = None,
        constant_bytes: bytes | None = None,
        meta: dict[str, Any] | None = None,
    ) -> int: ...
    def __len__(self) -> int: ...

ManifestRow = tuple[str, str, str]  # (component name, digest hex, summary)

class CacheKey:
    @property
    def hex(self) -> str: ...
    @property
    def manifest(self) -> list[ManifestRow]: ...
    @property
    def component_values(self) -> dict[str, bytes]: ...

def check_graph(graph: Graph) -> tuple[str, str] | None: ...
def compute_key(
    graph: Graph,
    inputs: list[TensorMeta | int | float | bool],
    autograd_state: dict[str, Any],
    config: dict[str, Any],
    environment: dict[str, Any],
    user: dict[str, Any],
) -> CacheKey: ...
def differing_components(a: list[ManifestRow], b: list[ManifestRow]) -> list[str]: ...
def explain_component(a: bytes, b: bytes, max_lines: int = 20) -> list[str]: ...
def default_cache_dir() -> str: ...

class LoadedEntry:
    key: str
    payload: bytes
    manifest: list[ManifestRow]
    metadata: dict[str, Any]
    component_values: dict[str, bytes]

class LocalStore:
    @staticmethod
    def open(dir: str) -> LocalStore: ...
    @property
    def dir(self) -> str: ...
    def entry_path(self, key: str) -> str: ...
    def get(self, key: str) -> LoadedEntry | None: ...
    def put(self, key: CacheKey, payload: bytes, metadata: dict[str, Any]) -> int: ...
    def remove(self, key: str) -> None: ...
    def list(self) -> list[tuple[str, int, int]]: ...
    def clear(self) -> None: ...
    def keys_for_graph(self, graph_digest: str) -> list[str]: ...
    def add_counters(self, delta: dict[str, int]) -> None: ...
    def read_counters(self) -> dict[str, int]: ...
