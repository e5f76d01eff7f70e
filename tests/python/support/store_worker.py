"""A process that hammers a cache directory through aotcache._core (no torch): for the concurrency and crash tests.

    python store_worker.py DIR MODE SEED ITERATIONS
MODE "mixed": random puts and gets on shared keys; every get must be a miss or a self-consistent payload.
MODE "writer": puts large entries in a loop until killed.
$AOTCACHE_WORKER_MAX_SIZE (bytes) bounds the store, so that processes evict entries others are reading.
Prints one line "OK reads=N hits=N puts=N" or "BAD <reason>" and exits 1.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys

from aotcache import _core, settings


def key_for(slot: int) -> _core.CacheKey:
    graph = _core.Graph()
    graph.add_node("x", "placeholder", "none", "x", (), {})
    graph.add_node("output", "output", "none", "output", ((_core.NodeRef(0),),), {})
    return _core.compute_key(graph, [], {}, {}, {}, {"slot": slot})


def payload(rng: random.Random, size: int) -> bytes:
    """Random bytes followed by their SHA-256: a reader can tell a whole payload from anything else."""
    body = rng.randbytes(size)
    return body + hashlib.sha256(body).digest()


def consistent(data: bytes) -> bool:
    return len(data) >= 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]


def main() -> int:
    directory, mode, seed, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    # The options of the settings in force (signing, eviction), with the worker's own bound.
    options = settings.store_options(settings.current())
    options["max_size"] = int(os.environ.get("AOTCACHE_WORKER_MAX_SIZE", "0"))
    store = _core.LocalStore.open(directory, **options)
    keys = [key_for(slot) for slot in range(6)]
    reads = hits = puts = 0
    for _ in range(iterations):
        key = rng.choice(keys)
        if mode == "writer" or rng.random() < 0.4:
            store.put(key, payload(rng, rng.choice([10, 4000, 300_000, 1_000_000])), {"writer": seed})
            puts += 1
            continue
        reads += 1
        try:
            entry = store.get(key.hex)
        except _core.CacheError as e:
            print(f"BAD read of {key.hex[:12]} raised {e}")
            return 1
        if entry is not None:
            hits += 1
            if not consistent(entry.payload):
                print(f"BAD torn payload under {key.hex[:12]}")
                return 1
    print(f"OK reads={reads} hits={hits} puts={puts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
