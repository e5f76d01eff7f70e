#!/usr/bin/env bash
# `make test-wheel`: the binary wheel from `make wheel` (dist/) installed into a fresh venv that has torch and nothing
# else, with no compiler, CMake or pkg-config on the path while it installs; then the extension's shared libraries
# must all resolve inside the wheel or to what every manylinux system has, the CLI must run with the same bare path,
# and the cold vs warm demo must pass (its cold process needs a C++ compiler for Inductor's kernels, as torch.compile
# on CPU always does: the path is restored for it). With .venv-torch-2.14.1 present (make test-torch TORCH=2.14.1),
# also shows that pip keeps a torch 2.14 environment's torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=$(ls dist/aotcache-*.whl)
venv="$PWD/build/wheel-venv"
rm -rf "$venv" build/wheel-cache
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0
bare="$PWD/build/wheel-bare-path"  # a PATH of the venv's own programs only
rm -rf "$bare" && mkdir -p "$bare"
for tool in g++ gcc c++ cc cmake pkg-config; do
  if env -i PATH="$venv/bin:$bare" bash -c "command -v $tool" >/dev/null 2>&1; then
    echo "check: $tool is reachable on the bare path" >&2
    exit 1
  fi
done
echo "check: installing $wheel with PATH=$venv/bin (no compiler, CMake or pkg-config reachable)"
env -i HOME="$HOME" PATH="$venv/bin:$bare" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-index --no-build-isolation "$wheel"
core=$("$venv/bin/python" -c "import aotcache._core as c; print(c.__file__)")
echo "check: $core links:"
ldd "$core" | sed 's/^/  /'
if ldd "$core" | grep -E 'libcrypto|libzstd|libhiredis' | grep -v 'aotcache.libs'; then
  echo "check: the extension links a system copy of a library the wheel should carry" >&2
  exit 1
fi
if ldd "$core" | grep -q 'not found'; then
  echo "check: a library of the extension is not found" >&2
  exit 1
fi
echo "check: the demo from the wheel"
(cache="$PWD/build/wheel-cache" && cd /tmp && "$venv/bin/python" -m aotcache.demo --cache-dir "$cache") | tee build/wheel-demo.log |
  tail -6
grep -q "^result: OK" build/wheel-demo.log
echo "check: the CLI from the wheel on the demo's cache, bare path"
env -i HOME="$HOME" PATH="$venv/bin:$bare" aotcache --dir "$PWD/build/wheel-cache" ls
env -i HOME="$HOME" PATH="$venv/bin:$bare" aotcache --dir "$PWD/build/wheel-cache" verify
if [ -x .venv-torch-2.14.1/bin/python ]; then
  echo "check: pip install --dry-run of the wheel into the torch 2.14.1 venv (test-torch reinstalls aotcache there)"
  .venv-torch-2.14.1/bin/python -m pip uninstall -q -y aotcache 2>/dev/null || true
  plan=$(.venv-torch-2.14.1/bin/python -m pip install --dry-run --disable-pip-version-check "$wheel" 2>&1 |
    grep '^Would install')
  echo "  $plan"
  if [[ "$plan" == *torch* ]]; then
    echo "check: pip would replace the environment's torch" >&2
    exit 1
  fi
fi
echo "check: OK"
