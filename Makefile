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

.PHONY: all deps deps-build build demo check test test-asan test-minimal bench install clean

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

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZEUS_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE nosan

# libzeus without its optional components (cmake/components.cmake): no libmicrohttpd, libcurl,
# SQLite or libcrypto. Part of `make check` (and so of CI, .ci/run) because any change can break it
# (a module that starts to call into a component), and a developer should see that before pushing.
MIN_FLAGS = -DZEUS_WITH_PFO_SERVER=OFF -DZEUS_WITH_PFO_CLIENT=OFF -DZEUS_WITH_RUN=OFF -DZEUS_WITH_EXPORTER=OFF \
            -DZEUS_WITH_DAEMON=OFF -DZEUS_BENCH=OFF
test-minimal: deps
	cmake -S . -B $(MIN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(MIN_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(MIN_BUILD) -j $(JOBS)
	cd $(MIN_BUILD) && ctest --output-on-failure -j $(JOBS)

check: test test-asan test-minimal
	@echo "make check: all test suites passed (normal, ASan+UBSan and minimal builds)"

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)
	@scripts/bench.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(MIN_BUILD)
