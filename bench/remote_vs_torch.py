"""aotcache's Redis remote tier against torch's own Redis remote caches, same models, fresh processes.

    .venv/bin/python bench/remote_vs_torch.py [--reps 3] [--models gpt_demo,mlp] [--signed-reps N]
        [--out bench/results/remote_vs_torch]        # writes OUT.json and OUT.md; needs redis-server, ~20 min
    .venv/bin/python bench/remote_vs_torch.py --render bench/results/remote_vs_torch.json   # only redo the .md

One redis-server on 127.0.0.1 (free port, no persistence), started and stopped here. Two "machines" A and B = two
separate local cache directories sharing that Redis. Per model, system and repetition (fresh directories, the
system's Redis db flushed first), three fresh processes (bench/worker.py, deterministic algorithms):
  1. cold: machine A, empty local directories, empty remote db: compiles and fills both;
  2. remote hit: machine B, empty local directories (no kernels compiled there yet): served from Redis;
  3. local hit: machine B again: meant to be served from B's local directories (torch: see the notes it writes).
Systems:
- aotcache: backend "aotcache", AOTCACHE_DIR=<machine>/aotcache, AOTCACHE_REMOTE=redis://127.0.0.1:PORT/0, a fresh
  TORCHINDUCTOR_CACHE_DIR=<machine>/inductor (kernels), torch's caches off (as bench/run.py does);
- aotcache_signed: the same with AOTCACHE_SIGNING_KEY set (in the first --signed-reps repetitions, default all);
- torch: backend "inductor", TORCHINDUCTOR_FX_GRAPH_CACHE=1, TORCHINDUCTOR_AUTOGRAD_CACHE=1 (local caches),
  TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1, TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1, TORCHINDUCTOR_REDIS_HOST/PORT and
  TORCHINDUCTOR_REDIS_URL=redis://127.0.0.1:PORT/1 (the URL wins in torch's RedisRemoteCacheBackend and selects db
  1, so the systems never share keys), TORCHINDUCTOR_CACHE_DIR=<machine>/inductor.
Per process: time to first result (compile + first step, after imports and model construction), compile time inside
it (Dynamo + the backend call, plus the lazily compiled backward where torch times it), C++ builds (count, seconds),
the hits (aotcache.stats() incl. its remote counters; torch's cache counters and its remote caches' own hit / miss /
put counters), the output checksum (SHA-256 of the loss and the gradients) and the load average at its start. After
each cold process: the entries in the system's Redis db (count, bytes) and the GET latency of its largest entry
(redis-py, median of 50). Medians over the repetitions; ratios are ratios of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from remote_latency import _free_port  # noqa: E402
from run import ROOT, _clean_env, machine_info  # noqa: E402

PHASES = ("cold", "remote_hit", "local_hit")
DB = {"aotcache": 0, "aotcache_signed": 2, "torch": 1}
SIGNING_KEY = "bench:" + "k" * 32
GET_REPS = 50


def _env(system: str, machine: Path, port: int) -> tuple[str, list[str], dict[str, str]]:
    env = _clean_env()
    env["TORCHINDUCTOR_CACHE_DIR"] = str(machine / "inductor")
    if system == "torch":
        env.update(
            TORCHINDUCTOR_FX_GRAPH_CACHE="1",
            TORCHINDUCTOR_AUTOGRAD_CACHE="1",
            TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1",
            TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE="1",
            TORCHINDUCTOR_REDIS_HOST="127.0.0.1",
            TORCHINDUCTOR_REDIS_PORT=str(port),
            TORCHINDUCTOR_REDIS_URL=f"redis://127.0.0.1:{port}/{DB[system]}",
        )
        return "inductor", [], env
    env.update(AOTCACHE_DIR=str(machine / "aotcache"), AOTCACHE_REMOTE=f"redis://127.0.0.1:{port}/{DB[system]}")
    if system == "aotcache_signed":
        env["AOTCACHE_SIGNING_KEY"] = SIGNING_KEY
    return "aotcache", ["--torch-caches-off"], env


def _compile_s(r: dict[str, Any]) -> float:
    """Dynamo + backend (`_compile.compile_inner`), plus the backward that plain Inductor compiles lazily at the first
    backward call (`backward._backward_impl`; aotcache compiles both inside the backend call)."""
    return r["phases"]["dynamo_s"] + r["phases"]["backend_s"] + r["torch_metrics_s"].get("backward._backward_impl", 0.0)


def run_process(model: str, system: str, phase: str, machine: Path, port: int, out: Path) -> dict[str, Any]:
    backend, extra, env = _env(system, machine, port)
    cmd = [sys.executable, str(BENCH / "worker.py"), model, backend, str(out), "--deterministic", *extra]
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise RuntimeError(f"worker {model} {system} {phase} failed with exit code {proc.returncode}")
    r = json.loads(out.read_text())
    r.update(system=system, phase=phase, process_wall_s=time.perf_counter() - t0, loadavg_at_start=list(load))
    r["compile_s"] = _compile_s(r)
    r["cxx"] = cxx_builds(r)
    r["served"] = served(r)
    print(
        f"  {model:9s} {system:16s} {phase:10s} first result {r['first_result_s']:7.2f}s compile "
        f"{r['compile_s']:7.2f}s C++ builds {r['compile_file']['count']:3d} ({r['compile_file']['seconds']:.1f}s) "
        f"{r['served']} load {load[0]:.1f}",
        flush=True,
    )
    return r


def cxx_builds(r: dict[str, Any]) -> dict[str, float]:
    """The process's C++ builds split into Inductor's vector-ISA probe libraries and the graphs' kernels."""
    sec, calls = r["probes"]["seconds"], r["probes"]["calls"]
    probe_builds = calls.get("vec_isa_probe.builds", 0)
    probe_s = sec.get("vec_isa_probe", 0.0) if probe_builds else 0.0  # builds + dlopen in child Pythons
    probe_build_s = max(0.0, probe_s - sec.get("vec_isa_probe.dlopen_child", 0.0))
    return {
        "isa_probe_builds": probe_builds,
        "isa_probe_s": probe_s,
        "kernel_builds": r["compile_file"]["count"] - probe_builds,
        "kernel_build_s": max(0.0, r["compile_file"]["seconds"] - probe_build_s),
    }


def served(r: dict[str, Any]) -> str:
    """Where the process's graphs came from, from the system's own counters."""
    if r["backend"] == "aotcache":
        s = r["aotcache_stats"]
        rem = s.get("remote", {})
        return (
            f"hits={s['hits']} misses={s['misses']} bypasses={s['bypasses']} remote.hits={rem.get('hits', 0)} "
            f"remote.puts={rem.get('puts', 0)} remote.errors={rem.get('errors', 0)} "
            f"remote.rejected_signature={rem.get('rejected_signature', 0)}"
        )
    c = r["torch_counters"]
    rs = r["torch_remote_cache_stats"]
    parts = [
        f"autograd_cache_hit={c.get('autograd_cache_hit', 0)} miss={c.get('autograd_cache_miss', 0)}",
        f"fxgraph_cache_hit={c.get('fxgraph_cache_hit', 0)} miss={c.get('fxgraph_cache_miss', 0)}",
    ]
    for name, st in sorted(rs.items()):
        parts.append(f"{name}(hit={st['hit']} miss={st['miss']} put={st['put']} exc={st['exception']})")
    return " ".join(parts)


def remote_hits(r: dict[str, Any]) -> int:
    if r["backend"] == "aotcache":
        return r["aotcache_stats"].get("remote", {}).get("hits", 0)
    return sum(st["hit"] for name, st in r["torch_remote_cache_stats"].items() if name.startswith("Remote"))


def remote_entries(client: Any, system: str) -> dict[str, Any]:
    """Entries of the system's db: count and bytes, and the GET latency of the largest."""
    keys = [k.decode() for k in client.keys("*")]
    if system.startswith("aotcache"):
        keys = [k for k in keys if k.startswith("aotcache:")]
    sizes = {k: client.strlen(k) for k in keys}
    out: dict[str, Any] = {"keys": len(keys), "bytes": sum(sizes.values()), "key_examples": sorted(keys)[:6]}
    if not keys:
        return out
    largest = max(sizes, key=sizes.get)
    times = []
    for _ in range(GET_REPS):
        t = time.perf_counter()
        client.get(largest)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    for k in keys:
        client.get(k)
    all_s = time.perf_counter() - t
    out.update(
        largest_bytes=sizes[largest],
        largest_get_ms=statistics.median(times) * 1e3,
        get_all_ms=all_s * 1e3,
        get_all_mb_per_s=out["bytes"] / all_s / 1e6,
    )
    return out


def measure(models: list[str], systems: list[str], reps: int, signed_reps: int, port: int, work: Path) -> list[dict]:
    import redis

    clients = {s: redis.Redis(host="127.0.0.1", port=port, db=DB[s]) for s in systems}
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        for model in models:
            order = [s for s in systems if s != "aotcache_signed" or rep < signed_reps]
            if rep % 2:
                order.reverse()  # alternate which system runs first: load changes fall on both
            for system in order:
                clients[system].flushdb()
                base = work / f"rep{rep}" / model / system
                a, b = base / "machine_a", base / "machine_b"
                for phase, machine in zip(PHASES, (a, b, b)):
                    r = run_process(model, system, phase, machine, port, base / f"{phase}.json")
                    r["rep"] = rep
                    if phase == "cold":
                        r["redis"] = remote_entries(clients[system], system)
                        print(f"    redis db {DB[system]}: {r['redis']}", flush=True)
                    runs.append(r)
                shutil.rmtree(base, ignore_errors=True)
    return runs


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _pairs(runs: list[dict[str, Any]], model: str, system: str, phase: str) -> list[float]:
    """system / torch per repetition (the two ran minutes apart in the same repetition)."""
    by_rep = {(r["system"], r["rep"]): r["first_result_s"] for r in runs if r["model"] == model and r["phase"] == phase}
    reps = sorted({rep for (sys_, rep) in by_rep if sys_ == system})
    return [round(by_rep[(system, rep)] / by_rep[("torch", rep)], 2) for rep in reps if ("torch", rep) in by_rep]


def summarize(runs: list[dict[str, Any]], models: list[str], systems: list[str]) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        shas = {r["output_checksum"]["sha256"] for r in runs if r["model"] == model}
        for system in systems:
            mine = [r for r in runs if r["model"] == model and r["system"] == system]
            if not mine:
                continue
            row: dict[str, Any] = {"model": model, "system": system, "n": len({r["rep"] for r in mine})}
            for phase in PHASES:
                ps = [r for r in mine if r["phase"] == phase]
                row[f"{phase}_s"] = _median([r["first_result_s"] for r in ps])
                row[f"{phase}_cpu_s"] = _median([r["cpu_s"] + r["children_cpu_s"] for r in ps])
                row[f"{phase}_compile_s"] = _median([r["compile_s"] for r in ps])
                for k in ("isa_probe_builds", "isa_probe_s", "kernel_builds", "kernel_build_s"):
                    row[f"{phase}_{k}"] = _median([r["cxx"][k] for r in ps])
                row[f"{phase}_remote_hits"] = [remote_hits(r) for r in ps]
                row[f"{phase}_served"] = [r["served"] for r in ps]
            row["remote_hit_over_cold"] = _ratio(row["remote_hit_s"], row["cold_s"])
            row["local_hit_over_cold"] = _ratio(row["local_hit_s"], row["cold_s"])
            colds = [r["redis"] for r in mine if r["phase"] == "cold"]
            row["redis_keys"] = _median([c["keys"] for c in colds])
            row["redis_bytes"] = _median([c["bytes"] for c in colds])
            row["redis_largest_bytes"] = _median([c.get("largest_bytes", 0) for c in colds])
            row["redis_largest_get_ms"] = _median([c["largest_get_ms"] for c in colds if "largest_get_ms" in c])
            row["redis_get_all_mb_per_s"] = _median([c["get_all_mb_per_s"] for c in colds if "get_all_mb_per_s" in c])
            row["outputs_equal_within_system"] = len({r["output_checksum"]["sha256"] for r in mine}) == 1
            row["outputs_equal_across_systems"] = len(shas) == 1
            sums = [r["output_checksum"]["sum"] for r in runs if r["model"] == model]
            row["output_sum_spread"] = max(sums) - min(sums)
            loads = [r["loadavg_at_start"][0] for r in mine]
            row["loadavg_1m"] = {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}
            rows.append(row)
        torch_row = next((r for r in rows if r["model"] == model and r["system"] == "torch"), None)
        for row in rows:
            if row["model"] == model and torch_row is not None:
                for phase in PHASES:
                    row[f"{phase}_over_torch"] = _ratio(row[f"{phase}_s"], torch_row[f"{phase}_s"])
                    row[f"{phase}_over_torch_per_rep"] = _pairs(runs, model, row["system"], phase)
    return rows


def notes(report: dict[str, Any]) -> list[str]:
    """Findings read off the counters, so that the table is not misread."""
    out = []
    runs = report["runs"]
    torch_local = [r for r in runs if r["system"] == "torch" and r["phase"] == "local_hit"]
    again = [r for r in torch_local if remote_hits(r) > 0]
    if again:
        out.append(
            f"- torch's third process (machine B again) was served from Redis, not from B's local caches, in "
            f"{len(again)} of {len(torch_local)} processes: its LocalAOTAutogradCache / LocalFxGraphCache missed "
            "and RemoteAOTAutogradCache / RemoteFxGraphCache hit (the remote-hit process before it put nothing into "
            "the local caches: torch does not write remote hits back to local disk). Its 'local hit' column is "
            "therefore a second remote hit, with the kernels already built in B's Inductor directory."
        )
    no_remote = [
        f"{r['model']} {r['system']} rep {r['rep']}" for r in runs if r["phase"] == "remote_hit" and remote_hits(r) == 0
    ]
    if no_remote:
        out.append(f"- NOT served from Redis in the remote-hit process: {', '.join(no_remote)}.")
    else:
        out.append("- Every remote-hit process was served from Redis (the systems' own remote hit counters above).")
    rebuilt = sorted({r["system"] for r in runs if r["phase"] == "remote_hit" and r["cxx"]["kernel_builds"] > 0})
    if rebuilt:
        out.append(
            f"- C++ builds on the fresh machine B, remote-hit process ({', '.join(rebuilt)}): Inductor's vector-ISA "
            "probe libraries (aotcache runs the probe for its key's environment, torch when it loads) and the "
            "graphs' kernels: the remote entry does not carry kernel binaries, the kernels are built from source "
            "when absent from the Inductor directory. The ISA-probe seconds include dlopen-ing each library in a "
            "child Python; kernel seconds are the C++ builds less the probe's, summed over Inductor's parallel "
            "compile workers (they can exceed the wall time)."
        )
    return out


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# aotcache remote tier vs torch's Redis remote caches",
        "",
        f"{m['date']}, {m['nproc']} cores ({m['cpu_model']}), {m['platform']}, Python {m['python']}, torch "
        f"{m['torch']}, aotcache {m['aotcache']}, redis-server {report['redis_server']}, redis-py "
        f"{report['redis_py']}. Command: `{report['command']}` ({report['wall_min']:.1f} min). Load average "
        f"(1, 5, 15 min) {', '.join(f'{x:.1f}' for x in report['loadavg_start'])} at the start, "
        f"{', '.join(f'{x:.1f}' for x in report['loadavg_end'])} at the end; per row below the 1-minute load at "
        "the processes' starts (min-max). The machine is shared: read the ratios, not the seconds.",
        "",
        "Time to first result (compile + first training step, after imports), seconds, median of n repetitions "
        "(each with fresh directories and a flushed Redis db). cold = machine A, empty local and remote; remote "
        "hit = machine B, empty local directories (no kernels compiled there); local hit = machine B again.",
        "",
        "| model | system | n | cold | remote hit | local hit | remote hit / cold | aotcache / torch (cold, remote "
        "hit, local hit) | remote-hit process: ISA-probe libs built (n, s) | remote-hit process: kernels built "
        "(n, s) | remote hits in remote-hit process | outputs "
        "equal | load 1m |",
        "|---|---|---|---:|---:|---:|---:|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        vs = "–" if row["system"] == "torch" else ", ".join(_f(row.get(f"{p}_over_torch"), "{:.2f}x") for p in PHASES)
        eq = (
            "yes"
            if row["outputs_equal_across_systems"]
            else ("within system" if row["outputs_equal_within_system"] else "no")
        )
        la = row["loadavg_1m"]
        lines.append(
            f"| {row['model']} | {row['system']} | {row['n']} | {_f(row['cold_s'])} | {_f(row['remote_hit_s'])} | "
            f"{_f(row['local_hit_s'])} | {_f(row['remote_hit_over_cold'], '{:.2f}')} | {vs} | "
            f"{_f(row['remote_hit_isa_probe_builds'], '{:.0f}')}, {_f(row['remote_hit_isa_probe_s'], '{:.1f}')} | "
            f"{_f(row['remote_hit_kernel_builds'], '{:.0f}')}, {_f(row['remote_hit_kernel_build_s'], '{:.1f}')} | "
            f"{row['remote_hit_remote_hits']} | {eq} | {la['min']:.1f}-{la['max']:.1f} |"
        )
    lines += [
        "",
        "Compile time inside the time to first result (Dynamo + backend call, + torch's lazy backward compile), "
        "seconds, median:",
        "",
        "| model | system | cold | remote hit | local hit | kernels built cold / remote hit / local hit |",
        "|---|---|---:|---:|---:|---|",
    ]
    for row in report["summary"]:
        lines.append(
            f"| {row['model']} | {row['system']} | {_f(row['cold_compile_s'])} | {_f(row['remote_hit_compile_s'])} "
            f"| {_f(row['local_hit_compile_s'])} | "
            + " / ".join(_f(row[f"{p}_kernel_builds"], "{:.0f}") for p in PHASES)
            + " |"
        )
    lines += [
        "",
        "CPU seconds of the process and its children (compile workers, probe children), median: steadier than wall "
        "time on a shared machine. And aotcache / torch per repetition (time to first result; the pair ran "
        "minutes apart in the same repetition):",
        "",
        "| model | system | CPU cold | CPU remote hit | CPU local hit | per-rep ratio cold | per-rep ratio remote hit "
        "| per-rep ratio local hit |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for row in report["summary"]:
        per_rep = [
            "–" if row["system"] == "torch" else ", ".join(f"{x:.2f}" for x in row.get(f"{p}_over_torch_per_rep", []))
            for p in PHASES
        ]
        lines.append(
            f"| {row['model']} | {row['system']} | "
            + " | ".join(_f(row.get(f"{p}_cpu_s"), "{:.1f}") for p in PHASES)
            + " | "
            + " | ".join(per_rep)
            + " |"
        )
    lines += [
        "",
        "Remote entries after the cold process (the system's own Redis db; aotcache: `aotcache:` keys), median:",
        "",
        "| model | system | keys | bytes | largest entry | GET largest, median of 50 | GET all keys once |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["summary"]:
        lines.append(
            f"| {row['model']} | {row['system']} | {_f(row['redis_keys'], '{:.0f}')} | "
            f"{_f(row['redis_bytes'], '{:,.0f}')} | {_f(row['redis_largest_bytes'], '{:,.0f}')} | "
            f"{_f(row['redis_largest_get_ms'], '{:.3f} ms')} | {_f(row['redis_get_all_mb_per_s'], '{:.0f} MB/s')} |"
        )
    lines += ["", "Where each process's graphs came from (first repetition):", ""]
    for row in report["summary"]:
        for p in PHASES:
            lines.append(f"- {row['model']} {row['system']} {p}: {row[f'{p}_served'][0]}")
    if report.get("notes"):
        lines += ["", *report["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--models", default="gpt_demo,mlp")
    parser.add_argument("--systems", default="aotcache,torch,aotcache_signed")
    parser.add_argument("--signed-reps", type=int, help="repetitions that include aotcache_signed (default: all)")
    parser.add_argument("--out", default=str(BENCH / "results" / "remote_vs_torch"))
    parser.add_argument(
        "--render", metavar="JSON", help="only recompute the summary of a saved OUT.json and rewrite OUT.md from it"
    )
    args = parser.parse_args()
    if args.render:
        report = json.loads(Path(args.render).read_text())
        models = list(dict.fromkeys(r["model"] for r in report["runs"]))
        systems = list(dict.fromkeys(r["system"] for r in report["runs"]))
        report["summary"] = summarize(report["runs"], models, systems)
        Path(args.render).write_text(json.dumps(report, indent=1) + "\n")
        report["notes"] = notes(report)
        Path(args.out).with_suffix(".md").write_text(markdown(report))
        return 0
    if args.signed_reps is None:
        args.signed_reps = args.reps
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("redis-server is not installed")
    import redis

    models, systems = args.models.split(","), args.systems.split(",")
    work = Path(tempfile.mkdtemp(prefix="aotcache_remote_vs_torch."))
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        cwd=work,
    )
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    try:
        for _ in range(100):  # wait until it answers
            try:
                redis.Redis(host="127.0.0.1", port=port).ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        version = redis.Redis(host="127.0.0.1", port=port).info("server")["redis_version"]
        runs = measure(models, systems, args.reps, args.signed_reps, port, work)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "command": " ".join([".venv/bin/python", "bench/remote_vs_torch.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "redis_server": version,
        "redis_py": redis.__version__,
        "reps": args.reps,
        "signed_reps": args.signed_reps,
        "wall_min": (time.perf_counter() - t0) / 60,
        "loadavg_start": list(load_start),
        "loadavg_end": list(os.getloadavg()),
        "summary": summarize(runs, models, systems),
        "runs": runs,
    }
    report["notes"] = notes(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
