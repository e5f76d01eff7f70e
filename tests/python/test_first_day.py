"""A first day as a user who is not root, on a machine whose apt packages root installed (the README's setup does
that part as root): the user clones the project into their home, runs the README's `make demo` (which makes their own
.venv with the system's Python, installs the pinned packages, builds aotcache and runs the demo), then runs a program
of theirs under the launcher twice (the second hits) and the CLI on the default cache directory, nothing configured.

Root-only paths and permissions are what this finds: a Python or a default directory under /root, a directory in
/tmp owned by root, a cache directory another user could read (this machine's root venv points into /root/.pyenv,
which no other user can enter). The user is created and removed here (needs root, useradd and runuser; CI runs as
root). Slow: a fresh venv and a build of aotcache (~5-8 min on 2 cores).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
        reason="creates a user: needs root, useradd and runuser",
    ),
    pytest.mark.timeout(900),
]
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

torch.manual_seed(0)
model = torch.compile(Net())
out = model(torch.randn(4, 8))
out.sum().backward()
print("OUT", out.detach().sum().item(), model.fc1.weight.grad.sum().item())
"""


@pytest.fixture(scope="module")
def newcomer():
    """(name, home, clone): a new user with a home directory and a clone of this repository's HEAD in it."""
    name = f"aotc{os.getpid() % 100000}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    clone = home / "aotcache"
    try:
        # The repository belongs to root: the user's git trusts it for this one command (git's safe.directory).
        done = _as(
            (name, home, home),
            "git",
            "-c",
            f"safe.directory={ROOT}",
            "-c",
            f"safe.directory={ROOT}/.git",
            "clone",
            "-q",
            str(ROOT),
            str(clone),
        )
        assert done.returncode == 0, done.stderr
        (home / "prog.py").write_text(PROGRAM)
        shutil.chown(home / "prog.py", name, name)
        yield name, home, clone
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(f"/tmp/torchinductor_{name}", ignore_errors=True)


def _as(user: tuple, *argv: str, cwd: Path | None = None, path: str = "") -> subprocess.CompletedProcess:
    """argv as `user`, in a login-like environment: their HOME, the system's PATH (no /root/.pyenv) and the
    machine's pip settings (system-wide config); `path` goes in front of PATH."""
    name, home, _ = user
    env = {
        "HOME": str(home),
        "USER": name,
        "LOGNAME": name,
        "PATH": f"{path + ':' if path else ''}/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv],
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=1500,
    )


def test_make_demo_launcher_and_cli_as_an_ordinary_user(newcomer):
    name, home, clone = newcomer
    demo = _as(newcomer, "make", "demo", cwd=clone)
    assert demo.returncode == 0 and "result: OK" in demo.stdout, demo.stdout[-3000:] + demo.stderr[-3000:]
    venv_bin = str(clone / ".venv" / "bin")

    # A program of the user's, nothing configured: the launcher routes torch.compile through aotcache, the cache
    # goes to the default directory in the user's home; the second process hits and computes the same.
    cold = _as(newcomer, "aotcache", "run", "python", "prog.py", path=venv_bin)
    warm = _as(newcomer, "aotcache", "run", "python", "prog.py", path=venv_bin)
    for run in (cold, warm):
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        assert "WARNING" not in run.stderr, run.stderr[-3000:]
    result = [line for line in cold.stdout.splitlines() if line.startswith("OUT ")]
    assert result and result == [line for line in warm.stdout.splitlines() if line.startswith("OUT ")]

    cache = home / ".cache" / "aotcache"
    assert cache.is_dir()
    info = cache.stat()
    assert info.st_uid == pwd.getpwnam(name).pw_uid and stat.S_IMODE(info.st_mode) == 0o700
    for path in cache.rglob("*"):
        assert path.stat().st_uid == info.st_uid, path
        assert not path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO), f"{path} open to others"

    stats = _as(newcomer, "aotcache", "stats", "--json", path=venv_bin)
    assert stats.returncode == 0, stats.stderr
    counts = json.loads(stats.stdout)
    assert counts["dir"] == str(cache), counts
    assert counts["counters"].get("hits", 0) >= 1 and counts["entries"] >= 1, counts
    listing = _as(newcomer, "aotcache", "ls", path=venv_bin)
    assert listing.returncode == 0 and " graph " in listing.stdout, listing.stdout
    # The user's Inductor directory is their own too (torch's default: /tmp/torchinductor_<user>).
    inductor = Path(f"/tmp/torchinductor_{name}")
    assert inductor.is_dir() and inductor.stat().st_uid == info.st_uid
