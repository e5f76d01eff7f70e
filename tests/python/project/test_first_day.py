"""A first day as a user who is not root, on a machine whose apt packages root installed (the README's setup does
that part as root): the user runs the demo, a program of theirs under the launcher twice (the second hits) and the CLI
on the default cache directory, nothing configured.

Root-only paths and permissions are what this finds: a Python or a default directory under /root, a directory in
/tmp owned by root, a cache directory another user could read (this machine's root venv points into /root/.pyenv,
which no other user can enter). The user is created and removed here (needs root, useradd and runuser; CI runs as
root).

Two depths. `make test` (CI): the user makes their own venv with the system's Python and borrows this checkout's
installed packages and build (a .pth: a fresh install and build cost 10+ minutes); everything aotcache does at run
time runs as the user. AOTCACHE_FIRST_DAY=full: the README word for word: the user clones the project into their home
and runs `make demo` (their own .venv, the pinned packages, aotcache built), then the same checks.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
        reason="creates a user: needs root, useradd and runuser",
    ),
    pytest.mark.timeout(900),
]
ROOT = REPO

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


FULL = os.environ.get("AOTCACHE_FIRST_DAY", "") == "full"
SITE_PACKAGES = Path(sys.executable).parent.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def newcomer():
    """(name, home, bin): a new user with a home directory, and the bin folder of their Python environment."""
    name = f"aotc{os.getpid() % 100000}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    try:
        (home / "prog.py").write_text(PROGRAM)
        shutil.chown(home / "prog.py", name, name)
        yield (name, home, _environment(name, home))
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(f"/tmp/torchinductor_{name}", ignore_errors=True)


def _environment(name: str, home: Path) -> Path:
    user = (name, home, None)
    if FULL:
        clone = home / "aotcache"  # where a new user would clone from the project's remote: HEAD, theirs
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True)
        subprocess.run(["chown", "-R", f"{name}:{name}", str(clone)], check=True)
        demo = _as(user, "make", "demo", cwd=clone)
        assert demo.returncode == 0 and "result: OK" in demo.stdout, demo.stdout[-3000:] + demo.stderr[-3000:]
        return clone / ".venv" / "bin"
    site = sorted(SITE_PACKAGES.glob("site-packages"))
    assert site, f"no site-packages under {SITE_PACKAGES}"
    for folder in (site[0], ROOT):
        if not all(part.stat().st_mode & stat.S_IXOTH for part in (folder, *folder.parents)):
            pytest.skip(f"{folder} cannot be entered by other users (a checkout under /root): nothing to borrow")
    made = _as(user, "python3", "-m", "venv", "--without-pip", str(home / "venv"))
    assert made.returncode == 0, made.stderr
    # The user's venv sees this checkout's packages and build (their .pth files too: aotcache's editable finder).
    ours = home / "venv" / "lib" / SITE_PACKAGES.name / "site-packages" / "borrowed.pth"
    ours.write_text(f"import site; site.addsitedir({str(site[0])!r})\n")
    demo = _as(user, "python", "-m", "aotcache.demo", path=str(home / "venv" / "bin"))
    assert demo.returncode == 0 and "result: OK" in demo.stdout, demo.stdout[-3000:] + demo.stderr[-3000:]
    return home / "venv" / "bin"


def _as(user: tuple, *argv: str, cwd: Path | None = None, path: str = "") -> subprocess.CompletedProcess:
    """argv as `user`, in a login-like environment: their HOME, the system's PATH (no /root/.pyenv) and the
    machine's pip settings (system-wide config); `path` goes in front of PATH. Without FULL the `aotcache` command
    comes from this checkout's venv, last on PATH (a native program anyone can run; the venv's python is root's)."""
    name, home, _ = user
    last = "" if FULL else f":{Path(sys.executable).parent}"
    env = {
        "HOME": str(home),
        "USER": name,
        "LOGNAME": name,
        "PATH": f"{path + ':' if path else ''}/usr/local/bin:/usr/bin:/bin{last}",
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


def test_demo_launcher_and_cli_as_an_ordinary_user(newcomer):
    name, home, bin_dir = newcomer
    venv_bin = str(bin_dir)

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
