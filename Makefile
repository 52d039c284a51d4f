# The two commands a user needs: `make demo` and `make check`.
# Each installs missing Debian packages itself (scripts/deps.sh), configures and builds.
BUILD      ?= build
ASAN_BUILD ?= build-asan
MIN_BUILD  ?= build-minimal
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(ZEUS_WERROR),1)
CMAKE_FLAGS += -DZEUS_WERROR=ON
endif
# `make check` builds the sources many times (normal, ASan, minimal, one build per component left
# out): with ccache (a test package of scripts/deps.sh) the builds after the first share their
# objects. Looked up when a recipe runs, so after `deps` has installed it; paths are hashed
# relative to the checkout, so that the build folders' objects match.
CCACHE = $(shell command -v ccache 2>/dev/null)
CMAKE_FLAGS += $(if $(CCACHE),-DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

# CMake's generated Makefiles run make recursively; without this every sub-make prints its
# "Entering directory" and "Leaving directory" lines (hundreds for one build).
MAKEFLAGS += --no-print-directory

.PHONY: all deps deps-build build demo check test test-asan test-minimal test-components bench gpu-check install clean

all: build

deps:
	@scripts/deps.sh all

deps-build:
	@scripts/deps.sh build

build: deps-build
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

# scripts/ctest.sh runs a failed test once more and lists those that passed only then (flakes):
# many tests time real processes on the wall clock, and a shared 2-core machine has bursts of load.
# The tests need cmocka and the other test packages: `deps` installs them, and the test tree is
# then required (ZEUS_TESTS=ON), so a missing package is an error rather than no tests.
test: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEUS_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	scripts/ctest.sh $(BUILD) -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZEUS_SANITIZE=ON -DZEUS_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	scripts/ctest.sh $(ASAN_BUILD) -j $(JOBS) -LE nosan

# libzeus without its optional components (cmake/components.cmake): no libmicrohttpd, libcurl,
# SQLite or libcrypto. Part of `make check` (and so of CI, .ci/run) because any change can break it
# (a module that starts to call into a component), and a developer should see that before pushing.
MIN_FLAGS = -DZEUS_WITH_PFO_SERVER=OFF -DZEUS_WITH_PFO_CLIENT=OFF -DZEUS_WITH_RUN=OFF -DZEUS_WITH_EXPORTER=OFF \
            -DZEUS_WITH_METRICS_PUSH=OFF -DZEUS_WITH_GRID=OFF -DZEUS_WITH_DAEMON=OFF -DZEUS_WITH_BSO_SERVER=OFF \
            -DZEUS_WITH_STORE=OFF -DZEUS_WITH_STORE_PG=OFF -DZEUS_WITH_HTTP_CLIENT=OFF -DZEUS_BENCH=OFF
test-minimal: deps
	cmake -S . -B $(MIN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(MIN_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(MIN_BUILD) -j $(JOBS)
	scripts/ctest.sh $(MIN_BUILD) -j $(JOBS)

# Every optional component can be left out alone: one build per zeus_component() of
# cmake/components.cmake with that one OFF (the others ON; tests, examples and benchmarks built, so
# a link error anywhere shows), and its unit tests run (scripts/test-components.sh). With ccache
# warm it costs ~45 s a component on 2 cores (most objects are cache hits), so it is part of
# `make check`; ZEUS_COMPONENT_TESTS="" runs every test of each build, "none" only builds.
COMP_BUILD ?= build-components
test-components: deps
	JOBS=$(JOBS) CMAKE_FLAGS="$(CMAKE_FLAGS)" scripts/test-components.sh $(COMP_BUILD)

check: test test-asan test-minimal test-components
	@echo "make check: all test suites passed (normal, ASan+UBSan, minimal and each-component-left-out builds)"

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)
	@scripts/bench.sh $(BUILD)

# Proves zeus on this machine's NVIDIA GPUs (scripts/gpu-check.sh, docs/gpu-check.md): a report in
# $(BUILD)/gpu-check/report.md and .json; says so and exits 0 when there is no GPU. Changing
# settings needs root or CAP_SYS_ADMIN. GPU_CHECK_FLAGS: more options (--gpus 0, --quick).
GPU_CHECK_OUT ?= $(BUILD)/gpu-check
GPU_CHECK_FLAGS ?=
gpu-check: build
	@scripts/gpu-check.sh --zeus $(BUILD)/zeus --out $(GPU_CHECK_OUT) $(GPU_CHECK_FLAGS)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(MIN_BUILD)
