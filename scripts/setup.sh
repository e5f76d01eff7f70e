#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test aotcache: apt packages, then .venv with the
# pinned tools and torch==2.13.0, then aotcache itself (editable). Safe to rerun: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(g++ make pkg-config libssl-dev libzstd-dev libgtest-dev python3-venv python3-dev clang-format
  libhiredis-dev redis-server)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: need root (or sudo) to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
if ! cmp -s requirements-dev.txt .venv/.requirements-installed; then
  echo "setup: installing pinned Python packages (torch==2.13.0, build and test tools)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt .venv/.requirements-installed
fi
