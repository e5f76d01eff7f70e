"""The counters' deferred writes: a served frame's counts reach the directory's counters file once per DEFER_S (or
at exit), summed, never lost; the process's own counters at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from aotcache import counters


class Store:
    def __init__(self) -> None:
        self.writes: list[dict[str, int]] = []
        self.dir = "/nowhere"

    def add_counters(self, delta: dict[str, int]) -> None:
        self.writes.append(dict(delta))


def test_deferred_deltas_are_written_once_summed(monkeypatch):
    monkeypatch.setattr(counters, "DEFER_S", 3600.0)
    counters.flush()
    before = counters.snapshot()["frames"].get("hits", 0)
    store = Store()
    for _ in range(50):
        counters.record({"frames.hits": 1, "hits": 2}, store, defer=True)
    assert store.writes == []  # nothing written yet ...
    assert counters.snapshot()["frames"]["hits"] == before + 50  # ... the process counts at once
    counters.flush()
    assert store.writes == [{"frames.hits": 50, "hits": 100}]
    counters.flush()
    assert len(store.writes) == 1


def test_deferred_deltas_are_written_when_due(monkeypatch):
    monkeypatch.setattr(counters, "DEFER_S", 0.0)
    store = Store()
    counters.record({"frames.hits": 1}, store, defer=True)
    assert store.writes == [{"frames.hits": 1}]


def test_a_failing_store_is_counted_not_raised(monkeypatch):
    monkeypatch.setattr(counters, "DEFER_S", 3600.0)

    class Broken(Store):
        def add_counters(self, delta: dict[str, int]) -> None:
            raise OSError("disk full")

    errors = counters.snapshot()["error_kinds"].get("stats_write", 0)
    counters.record({"frames.hits": 1}, Broken(), defer=True)
    counters.flush()
    assert counters.snapshot()["error_kinds"]["stats_write"] == errors + 1


def test_the_process_exit_writes_what_waits(tmp_path):
    """A real store: deferred counts reach the directory's counters file at the interpreter's exit."""
    program = textwrap.dedent(
        f"""
        from aotcache import _core, counters
        counters.DEFER_S = 3600.0
        store = _core.LocalStore.open({str(tmp_path / "cache")!r})
        for _ in range(7):
            counters.record({{"frames.hits": 1}}, store, defer=True)
        assert "frames.hits" not in store.read_counters()
        """
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=120)
    check = f"from aotcache import _core; print(_core.LocalStore.open({str(tmp_path / 'cache')!r}).read_counters())"
    out = subprocess.run([sys.executable, "-c", check], check=True, timeout=120, capture_output=True, text=True)
    assert "'frames.hits': 7" in out.stdout, out.stdout
