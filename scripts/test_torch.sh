#!/usr/bin/env bash
# `make test-torch TORCH=<version>`: the cross-version subset of the tests (end to end, frames, the light load, the
# guards on torch's internals, DTensor keys, the zoo's CI items, the adversarial suite) on another torch, in its own
# venv `.venv-torch-<version>`, with aotcache built into it from this checkout. CI runs it on 2.14.1 (the machine's
# local package index has it); 2.15.0 comes from the registry (~2.6 GB with its nvidia-* packages).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/test_torch.sh TORCH_VERSION}
venv=".venv-torch-$version"
PYTHON=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
# The same pinned tools as .venv, another torch. A machine's pip may cap torch through a constraints file
# (`pip config list`): this venv asks for the version named, so the cap is lifted for its installs only.
wanted="$venv/.requirements-wanted"
{ echo "torch==$version"; grep -v '^torch==' requirements-dev.txt; } > "$wanted"
if ! cmp -s "$wanted" "$venv/.requirements-installed"; then
  echo "test-torch: installing torch==$version and the pinned tools into $venv"
  PIP_CONSTRAINT=/dev/null "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$wanted"
  cp "$wanted" "$venv/.requirements-installed"
fi
echo "test-torch: building aotcache into $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
  -C build-dir="build/torch-$version" .
"$venv/bin/python" -c "import torch, aotcache; print('test-torch: torch', torch.__version__, 'aotcache', aotcache.__file__)"
# aotcache is imported from the venv (the checkout keeps it under python/, not on the path). TESTS overrides the files.
# The longest files first: pytest-xdist keeps the order (--no-loadscope-reorder), so neither worker ends on a long one.
default_tests="tests/python/soundness/test_adversarial.py tests/python/integration/test_zoo.py
  tests/python/integration/test_end_to_end.py tests/python/frames/test_frames.py
  tests/python/torch_glue/test_torch_internals.py tests/python/torch_glue/test_wrapper_loading.py
  tests/python/capture/test_distributed_tensor.py tests/python/torch_glue/test_torch_boundary.py
  tests/python/torch_glue/test_patching.py"
# shellcheck disable=SC2086  # a list of paths
exec "$venv/bin/python" -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=10 ${TESTS:-$default_tests}
