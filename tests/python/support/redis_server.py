"""A real redis-server for the tests: a child process on 127.0.0.1 at a free port, without persistence; and the
pytest fixtures `redis_factory` (start several) and `redis` (one), which kill theirs at the end of the test."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from aotcache import _core


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server child on 127.0.0.1 at a free port, without persistence."""

    def __init__(self, workdir: Path):
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--enable-debug-command", "local", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            probe = _core.RemoteStore.open(self.url, down_seconds=0)
            try:
                probe.get("0" * 64)
                return
            except _core.RemoteUnavailableError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def cli(self, *args: str, timeout: float = 10) -> str:
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=timeout
        )
        return out.stdout.strip()

    def store(self, **options) -> _core.RemoteStore:
        return _core.RemoteStore.open(self.url, down_seconds=0, **options)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def redis_factory(tmp_path):
    servers: list[RedisServer] = []

    def start() -> RedisServer:
        d = tmp_path / f"redis{len(servers)}"
        d.mkdir()
        servers.append(RedisServer(d))
        return servers[-1]

    yield start
    for s in servers:
        s.kill()


@pytest.fixture
def redis(redis_factory) -> RedisServer:
    return redis_factory()
