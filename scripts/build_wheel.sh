#!/usr/bin/env bash
# `make wheel`: a binary wheel of aotcache in dist/ that installs without a compiler or -dev packages. pip builds the
# wheel (the extension and the `aotcache` CLI); auditwheel copies the shared libraries they link that a manylinux
# system does not promise (OpenSSL's libcrypto, zstd, hiredis) into the wheel, rewrites their run paths, and tags the
# wheel with the oldest manylinux policy its symbols allow.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
if ! cmp -s requirements-wheel.txt "$venv/.wheel-requirements-installed"; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-wheel.txt
  cp requirements-wheel.txt "$venv/.wheel-requirements-installed"
fi
rm -rf build/wheel-raw dist
"$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w build/wheel-raw \
  -C build-dir=build/wheel .
raw=$(ls build/wheel-raw/aotcache-*.whl)
"$venv/bin/auditwheel" show "$raw"
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w dist "$raw"
ls -l dist/
