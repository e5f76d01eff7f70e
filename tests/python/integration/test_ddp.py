"""DistributedDataParallel under torch's defaults (optimize_ddp on: Dynamo's DDP optimizer splits the graph at
bucket boundaries and compiles each piece with fake inputs), real torchrun jobs on gloo: every piece cached once for
the whole job, frames served warm with the split, results per rank bitwise equal to uncached inductor. FSDP2 in its
documented compile pattern and DTensor graphs (tensor parallelism) the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SUPPORT, assert_bitwise_equal

pytestmark = pytest.mark.timeout(1500)  # torchrun jobs of 2 and 4 ranks on 2 cores
HERE = SUPPORT
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _job(
    tmp: Path,
    name: str,
    ranks: int,
    backend: str,
    cache: Path,
    bucket_cap_mb: str = "1",
    worker: str = "ddp",
    **env: str,
) -> list:
    full = {
        **os.environ,
        "AOTCACHE_DIR": str(cache),
        # The reference and the cold job share one Inductor directory (each C++ kernel is built once, loaded by its
        # key the second time: the same code); a warm job has its own, so its kernels come from aotcache's entries.
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / ("inductor-compile" if name in ("ref", "cold") else f"inductor-{name}")),
        "OMP_NUM_THREADS": "1",
        **env,
    }
    argv = [TORCHRUN, f"--nproc_per_node={ranks}", "--standalone", str(HERE / f"{worker}_worker.py"), backend]
    argv += [str(tmp / name)] + ([bucket_cap_mb] if worker == "ddp" else [])
    done = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{name}: {done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return [torch.load(tmp / f"{name}.{r}") for r in range(ranks)]


def _graph_entries(cache: Path) -> int:
    exe = Path(sys.executable).parent / "aotcache"
    listing = subprocess.run([str(exe), "--dir", str(cache), "ls"], capture_output=True, text=True).stdout
    return sum(" graph " in line for line in listing.splitlines())


# 2 ranks: a job of 4 ranks compiles the same pieces (bucket boundaries do not depend on the world size) and
# single-flight across 4 ranks is the DTensor test's; DDP_RANKS=2,4 runs both.
@pytest.mark.parametrize("ranks", [int(r) for r in os.environ.get("DDP_RANKS", "2").split(",")])
def test_ddp_pieces_cached_once_per_job_and_frames_served_warm(tmp_path, ranks):
    cache = tmp_path / "cache"
    ref = _job(tmp_path, "ref", ranks, "inductor", tmp_path / "unused")
    cold = _job(tmp_path, "cold", ranks, "aotcache", cache)
    warm = _job(tmp_path, "warm", ranks, "aotcache", cache, AOTCACHE_FRAMES_VERIFY="1")
    for r in range(ranks):
        assert_bitwise_equal(cold[r]["out"], ref[r]["out"])
        assert_bitwise_equal(warm[r]["out"], ref[r]["out"])
        assert not cold[r]["stats"]["bypass_reasons"], cold[r]["stats"]["bypass_reasons"]
    # One compile per distinct piece for the whole job: the other ranks wait for it and hit (the pieces hold nothing
    # of the rank, so every rank's piece is the same entry).
    misses = sum(c["stats"]["misses"] for c in cold)
    pieces = _graph_entries(cache)
    assert pieces >= 3 and misses == pieces, (misses, pieces)
    for r in range(ranks):
        stats = warm[r]["stats"]
        assert stats["misses"] == 0 and stats["hits"] >= pieces, stats
        frames = stats["frames"]
        # Every frame served but the one Dynamo makes no code for; the split's pieces come with the frame; the
        # verifier traced each served frame again and found it equal.
        assert frames.get("graphs", 0) >= pieces and frames.get("hits", 0) >= 1, frames
        assert frames.get("misses", 0) == frames.get("bypass.no_code", 0), frames
        assert frames.get("verify.match", 0) == frames["hits"] and not frames.get("verify.mismatch"), frames


def test_another_bucket_layout_is_another_frame(tmp_path):
    """The split points are the bucket layout's: a job with another bucket cap must not be served the frame of the
    first layout (its pieces differ); it traces, splits its own way and gets inductor's results."""
    cache = tmp_path / "cache"
    _job(tmp_path, "cold", 2, "aotcache", cache, bucket_cap_mb="1")
    ref = _job(tmp_path, "ref", 2, "inductor", tmp_path / "unused", bucket_cap_mb="4")
    other = _job(tmp_path, "other", 2, "aotcache", cache, bucket_cap_mb="4")
    for r in range(2):
        assert_bitwise_equal(other[r]["out"], ref[r]["out"])
        frames = other[r]["stats"]["frames"]
        assert frames.get("miss.no_entry", 0) >= 2, frames  # the model's frame: a new key, not a stale candidate


def test_fsdp2_blocks_cached_and_frames_served_warm(tmp_path):
    """FSDP2's documented pattern (each block compiled, then `fully_shard`): the block's graph is one entry for every
    rank and block, warm every frame is served (its guards rebuild the module as an instance of the FSDP class
    `fully_shard` made; pickle's default would rebuild the original class and reject the call), verified equal to
    a fresh trace; losses and every gathered parameter bitwise equal to uncached inductor's."""
    cache = tmp_path / "cache"
    ref = _job(tmp_path, "ref", 2, "inductor", tmp_path / "unused", worker="fsdp")
    cold = _job(tmp_path, "cold", 2, "aotcache", cache, worker="fsdp")
    warm = _job(tmp_path, "warm", 2, "aotcache", cache, worker="fsdp", AOTCACHE_FRAMES_VERIFY="1")
    for r in range(2):
        assert_bitwise_equal(cold[r]["out"], ref[r]["out"])
        assert_bitwise_equal(warm[r]["out"], ref[r]["out"])
        assert not cold[r]["stats"]["bypass_reasons"], cold[r]["stats"]["bypass_reasons"]
        assert cold[r]["stats"]["frames"].get("recorded", 0) >= 1, cold[r]["stats"]["frames"]
        stats = warm[r]["stats"]
        assert stats["misses"] == 0 and stats["bypasses"] == 0 and stats["hits"] >= 1, stats
        frames = stats["frames"]
        assert frames.get("hits", 0) >= 1 and not frames.get("misses"), frames
        assert frames.get("verify.match", 0) == frames["hits"] and not frames.get("verify.mismatch"), frames
    assert _graph_entries(cache) == sum(c["stats"]["misses"] for c in cold)


def _dtensor_entries(ranks: int) -> int:
    """The graph entries dtensor_worker.py's cases make on `ranks` ranks: one for every rank where the graph is the
    same on each (tp_mlp, tp_block, the evenly sharded specs), one per rank where the key holds the rank's coordinate
    (uneven: 2 * ranks + 1 rows; dropout; specs' (Replicate, Shard(1)) pair shards 6 columns), one per tp group for
    tp_2d (4 ranks: two groups)."""
    specs = 2 + (1 if 6 % ranks == 0 else ranks)
    return 1 + 1 + specs + ranks + ranks + (2 if ranks == 4 else 0)


# 4 ranks by default (a 2-D mesh, tp_2d, single-flight across 4, uneven shards of the 6 columns); 2 ranks add only the
# even split of those columns (one graph for every rank) and take 200 s: DTENSOR_RANKS=2,4 runs both.
@pytest.mark.parametrize("ranks", [int(r) for r in os.environ.get("DTENSOR_RANKS", "4").split(",")])
def test_dtensor_graphs_cached_once_per_job_and_frames_served_warm(tmp_path, ranks):
    """Tensor parallelism (parallelize_module, a torchtitan-style block plan, a 2-D mesh on 4 ranks) and DTensor
    functions: every graph cached (the mesh by layout and process groups, DTensor inputs by local tensor and spec,
    placements by kind), one compile per distinct key for the whole job, the rank's coordinate keyed only where the
    code can depend on it; warm every graph a hit and every frame served, verified equal to a fresh trace; every
    output, gradient and parameter bitwise equal to uncached inductor's on every rank."""
    cache = tmp_path / "cache"
    ref = _job(tmp_path, "ref", ranks, "inductor", tmp_path / "unused", worker="dtensor")
    cold = _job(tmp_path, "cold", ranks, "aotcache", cache, worker="dtensor")
    warm = _job(tmp_path, "warm", ranks, "aotcache", cache, worker="dtensor", AOTCACHE_FRAMES_VERIFY="1")
    for r in range(ranks):
        assert_bitwise_equal(cold[r]["out"], ref[r]["out"])
        assert_bitwise_equal(warm[r]["out"], ref[r]["out"])
        stats = cold[r]["stats"]
        assert not stats["bypass_reasons"] and not stats["internal_errors"], stats
        assert stats["frames"].get("recorded", 0) >= 5, stats["frames"]
    entries = _graph_entries(cache)
    assert entries == _dtensor_entries(ranks) == sum(c["stats"]["misses"] for c in cold), entries
    for r in range(ranks):
        stats = warm[r]["stats"]
        assert stats["misses"] == 0 and stats["bypasses"] == 0 and stats["hits"] >= 5, stats
        frames = stats["frames"]
        assert frames.get("hits", 0) >= 5 and not frames.get("misses"), frames
        assert frames.get("verify.match", 0) == frames["hits"] and not frames.get("verify.mismatch"), frames
    if ranks != 2:
        return
    # Frames off: Dynamo traces every frame and every graph is served from its entry.
    off = _job(tmp_path, "off", ranks, "aotcache", cache, worker="dtensor", AOTCACHE_FRAMES="0")
    for r in range(ranks):
        assert_bitwise_equal(off[r]["out"], ref[r]["out"])
        stats = off[r]["stats"]
        assert stats["misses"] == 0 and stats["bypasses"] == 0 and stats["hits"] >= 5, stats
    # A mesh made from another process group of the same ranks: equal to the cached one for Dynamo's guards, but its
    # collectives run on a group of another name, which the compiled code holds. No frame of a mesh is served (the
    # frame's mesh guard), every graph is a new key (its key names the groups), compiled once for the job; results
    # still equal.
    other = _job(tmp_path, "other", ranks, "aotcache", cache, worker="dtensor", DTENSOR_MESH_FROM_GROUP="1")
    for r in range(ranks):
        assert_bitwise_equal(other[r]["out"], ref[r]["out"])
        assert not other[r]["stats"]["frames"].get("hits"), other[r]["stats"]["frames"]
    assert sum(o["stats"]["misses"] for o in other) == _dtensor_entries(ranks)
    assert _graph_entries(cache) == 2 * entries
