# The two commands a user needs: `make demo` and `make check`.
# Each installs missing Debian packages itself (scripts/deps.sh), configures and builds.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(ZEUS_WERROR),1)
CMAKE_FLAGS += -DZEUS_WERROR=ON
endif

# CMake's generated Makefiles run make recursively; without this every sub-make prints its
# "Entering directory" and "Leaving directory" lines (hundreds for one build).
MAKEFLAGS += --no-print-directory

.PHONY: all deps deps-build build demo check test test-asan bench install clean

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

# The tests need cmocka and the other test packages: `deps` installs them, and the test tree is
# then required (ZEUS_TESTS=ON), so a missing package is an error rather than no tests.
test: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEUS_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZEUS_SANITIZE=ON -DZEUS_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE nosan

check: test test-asan
	@echo "make check: all test suites passed (normal and ASan+UBSan builds)"

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)
	@scripts/bench.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
