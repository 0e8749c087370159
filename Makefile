# Convenience front end over CMake. The two quick-start commands are `make demo` and
# `make check`; both install missing Debian packages first (scripts/deps.sh).
BUILD      ?= build
BUILD_SAN  ?= build-san
BUILD_FUZZ ?= build-fuzz
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 20

.PHONY: all deps build check unit integration demo install fuzz-smoke fuzz bench valgrind clean

all: build

deps:
	@sh scripts/deps.sh

# Plain optimized build (no sanitizers).
build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite under ASan+UBSan: unit tests, integration tests, fuzz smoke.
check: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) --no-print-directory fuzz-smoke

unit: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L unit -j $(JOBS)

integration: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L integration

# The main job: a confined worker reaching an allowlisted origin through egressd.
demo: build
	@sh scripts/demo.sh $(BUILD)

install: build
	cmake --install $(BUILD)

# Each libFuzzer harness for a bounded time (CI runs this through `make check`).
fuzz-smoke: deps
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_FUZZ=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS)
	sh scripts/fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS)

fuzz: deps
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_FUZZ=ON >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS)
	sh scripts/fuzz.sh $(BUILD_FUZZ) 600

bench: build
	sh bench/run.sh $(BUILD)

valgrind: deps
	cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build-vg -j $(JOBS)
	sh scripts/valgrind.sh build-vg

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) build-vg
