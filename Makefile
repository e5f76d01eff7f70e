# aotcache: `make demo` and `make test` set everything up on a fresh Debian 12 machine, then run.
.DEFAULT_GOAL := help
.PHONY: help setup install build-cpp demo test test-torch wheel test-wheel test-cpp test-python zoo lint format bench bench-quick bench-zoo bench-peers fuzz fuzz-frames clean

VENV        := .venv
PY          := $(VENV)/bin/python
CPP_BUILD   := build/cpp
# Warnings are errors in every build these targets make (CI runs `make test`).
export AOTCACHE_WERROR ?= ON
# Two pytest workers, one test file each (module fixtures run once): most tests wait on compiles in subprocesses.
PYTEST_FLAGS ?= -n 2 --dist loadfile --no-loadscope-reorder --durations=40
PY_SOURCES  := $(shell find python -name '*.py' -o -name '*.cc')
CPP_SOURCES := $(shell find include src -name '*.h' -o -name '*.cc') CMakeLists.txt pyproject.toml

help:
	@echo "make demo    set up (apt, .venv, build) and run the cold-vs-warm demo in two fresh processes"
	@echo "make test    set up and run every test (C++ ctest + pytest), with the frame cache on and off"
	@echo "make test-torch TORCH=2.14.1   the cross-version subset on another torch, in .venv-torch-<version>"
	@echo "make wheel   a binary wheel in dist/ (shared libraries bundled by auditwheel); make test-wheel installs it fresh"
	@echo "make zoo     the Hugging Face model zoo, every model and workload: aotcache vs inductor, cold/warm (~20-25 min)"
	@echo "make lint    clang-format and ruff checks"
	@echo "make bench   aotcache vs torch's caches, fresh processes (25-40 min on 2 shared cores): bench/results/ + plots"
	@echo "make bench-quick   smoke run of the benchmark (2 models, fewest reps, a few minutes): build/bench-quick/"
	@echo "make bench-peers   every peer (torch caches, mega-cache, caching_precompile, aot_compile) and aotcache against eager, zoo + scale rows: bench/results/peers.*"
	@echo "make bench-zoo   the zoo and the training jobs (DDP, Trainer, nanoGPT) side by side with torch's caches, fresh processes (~40 min): bench/results/zoo.*, jobs.*"
	@echo "make fuzz    build the graph-format fuzzer (clang, ASan+UBSan) and run it FUZZ_SECONDS (60)"
	@echo "make fuzz-frames   N generated program pairs (SEED, N=500): A cold, B warm verified, B under inductor"
	@echo "make clean   remove build outputs (keeps .venv)"

setup:
	@scripts/setup.sh

# The editable install rebuilds the extension and the CLI when C++ or build files change, and maps the package's
# files again when one is added, moved or removed (a folder's time changes then; an edit in place needs nothing).
PY_DIRS := $(shell find python/aotcache -type d -not -name __pycache__)
$(VENV)/.aotcache-installed: $(CPP_SOURCES) python/bindings/core_module.cc pyproject.toml $(PY_DIRS) | setup
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

install: setup $(VENV)/.aotcache-installed

build-cpp: setup
	$(VENV)/bin/cmake -S . -B $(CPP_BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAOTCACHE_WERROR=$(AOTCACHE_WERROR) >/dev/null
	$(VENV)/bin/cmake --build $(CPP_BUILD)

demo: install
	$(PY) -m aotcache.demo

test-cpp: build-cpp
	cd $(CPP_BUILD) && ../../$(VENV)/bin/ctest --output-on-failure

# Every suite runs with the frame cache on (the default). A file marked `frames_off_too` (pytestmark; its warm
# processes would take another path with frames off: Dynamo traces, the graphs hit) runs a second time with
# AOTCACHE_FRAMES=0, so the graph pipeline alone is proven on it too. The others run once: the adversarial suite, the
# variant bank and the zoo judge a frames-off warm process beside the frames-on one from their single cold pass
# (tests/python/support/pass_runner.py, variant_bank.Bank); the frame cache's own suites; those that never compile through
# aotcache; those whose processes only write, read or share entries, where the frames-on pass is the superset (a
# served frame loads its graphs through the same path as a graph hit); those whose judgement is the cold process's.
FRAMES_OFF_SUITES ?= $(shell grep -l '^pytestmark.*frames_off_too' tests/python/*/test_*.py)
# pytest-xdist (--dist loadfile) gives each of its two workers one file at a time, the next in the list when a worker
# is nearly done with its file. By default it sorts the files by their number of tests, which puts suites of few
# long tests (tensorify's Hugging Face run, the DDP jobs, the zoo) at the end, on one worker while the other idles:
# --no-loadscope-reorder keeps this list, the longest suites first (longest-first list scheduling).
# The order: CI's seconds per file (conftest prints them at the end of a run), longest first.
ALL_SUITES := $(sort $(wildcard tests/python/*/test_*.py))
LONGEST_NAMES := test_variant_bank.py test_frame_pairs.py test_adversarial.py test_tensorify.py test_ddp.py \
                 test_enable.py test_end_to_end.py test_frames.py test_dynamic_shapes.py test_zoo.py \
                 test_single_flight.py test_torch_internals.py test_remote.py test_clients.py test_first_day.py \
                 test_isa_probe.py test_cacheability.py test_store_faults.py test_kernels.py
LONGEST := $(foreach name,$(LONGEST_NAMES),$(filter %/$(name),$(ALL_SUITES)))
PYTHON_SUITES := $(LONGEST) $(filter-out $(LONGEST),$(ALL_SUITES))
# One Inductor kernel directory for the tests of both workers and both passes (conftest's inductor_dir), fresh per
# run: a kernel is built once per run, as on one machine; the suites that need an empty one make their own.
TEST_INDUCTOR := $(CURDIR)/build/test-inductor
test-python: install
	rm -rf $(TEST_INDUCTOR)
	AOTCACHE_TEST_INDUCTOR_DIR=$(TEST_INDUCTOR) $(PY) -m pytest -q $(PYTEST_FLAGS) $(PYTHON_SUITES)
	AOTCACHE_TEST_INDUCTOR_DIR=$(TEST_INDUCTOR) AOTCACHE_FRAMES=0 $(PY) -m pytest -q $(PYTEST_FLAGS) -m frames_off_too \
	  $(FRAMES_OFF_SUITES)

test: lint test-cpp test-python

# A binary wheel in dist/ (auditwheel: shared libraries bundled, manylinux tag); tests/wheel/check.sh installs it
# into a fresh venv without compilers on the path and runs the demo and the CLI from it.
wheel: setup
	scripts/build_wheel.sh

test-wheel: wheel
	tests/wheel/check.sh

# The cross-version subset on another torch in its own venv (.venv-torch-$(TORCH)): make test-torch TORCH=2.14.1
# (TESTS="tests/python/test_x.py ..." runs other files)
TORCH ?= 2.14.1
test-torch: setup
	scripts/test_torch.sh $(TORCH)

# Generated program pairs against the frame cache (tests/python/support/frame_pairs.py; CI runs 90 of one seed).
SEED ?= 1
N    ?= 500
fuzz-frames: install
	$(PY) tests/python/support/frame_pairs_runner.py --seed $(SEED) --n $(N)

# The whole zoo (make test runs the CI subset, zoo_models.CI_ITEMS); -s: the table.
zoo: install
	AOTCACHE_ZOO=all nice $(PY) -m pytest -q -s tests/python/integration/test_zoo.py

lint: setup
	clang-format --dry-run --Werror $$(find include src fuzz python/bindings bench/cpp -name '*.h' -o -name '*.cc')
	$(VENV)/bin/ruff format --check python tests bench scripts
	$(VENV)/bin/ruff check python tests bench scripts

format: setup
	clang-format -i $$(find include src fuzz python/bindings bench/cpp -name '*.h' -o -name '*.cc')
	$(VENV)/bin/ruff format python tests bench scripts

$(VENV)/.bench-installed: requirements-bench.txt | setup
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-bench.txt
	@touch $@

# Nice'd: the development machine is shared; the harness reports ratios measured side by side in one run.
# aotcache's modules are byte-compiled first, as a wheel install does (torch's and transformers' already are): the
# editable install under PYTHONDONTWRITEBYTECODE=1 would compile them from source in every timed process.
BYTE_COMPILE := $(PY) -m compileall -q python/aotcache

bench: install $(VENV)/.bench-installed
	$(BYTE_COMPILE)
	nice $(PY) bench/run.py

bench-quick: install $(VENV)/.bench-installed
	$(BYTE_COMPILE)
	nice $(PY) bench/run.py --quick

bench-zoo: install $(VENV)/.bench-installed
	$(BYTE_COMPILE)
	nice $(PY) bench/zoo.py
	nice $(PY) bench/jobs.py

# Every peer side by side with eager (torch's caches, mega-cache, caching_precompile, aot_compile, aotcache), the
# zoo's items and the scale rows (GPT-2 124M, 56 frames): bench/results/peers.*
bench-peers: install $(VENV)/.bench-installed
	$(BYTE_COMPILE)
	nice $(PY) bench/peers.py
FUZZ_BUILD   := build/fuzz
FUZZ_SECONDS ?= 60
# libFuzzer over the graph-format reader, seeded with the fixture graphs; new inputs collect in $(FUZZ_BUILD)/corpus.
fuzz: setup
	$(VENV)/bin/cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAOTCACHE_BUILD_FUZZERS=ON \
	  -DAOTCACHE_BUILD_TESTS=OFF -DAOTCACHE_WERROR=$(AOTCACHE_WERROR) >/dev/null
	$(VENV)/bin/cmake --build $(FUZZ_BUILD) --target graph_format_fuzzer
	mkdir -p $(FUZZ_BUILD)/corpus
	cd $(FUZZ_BUILD) && ./graph_format_fuzzer corpus ../../tests/data/graphs -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=16384 -print_final_stats=1

clean:
	rm -rf build $(VENV)/.aotcache-installed
