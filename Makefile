# Convenience front end over CMake. The two quick-start commands are `make demo` and
# `make check`; both install missing Debian packages first (scripts/deps.sh).
BUILD      ?= build
BUILD_SAN  ?= build-san
BUILD_FUZZ ?= build-fuzz
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 20

SOAK_SECONDS ?= 600

.PHONY: all deps build check unit integration soak demo install fuzz-smoke fuzz bench valgrind clean

all: build

deps:
	@sh scripts/deps.sh

# Plain optimized build (no sanitizers, no test seams: EGRESS_TESTING=OFF); what install
# installs.
build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DEGRESS_TESTING=OFF >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite under ASan+UBSan: unit tests, integration tests, fuzz smoke.
check: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) --no-print-directory fuzz-smoke

unit: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L unit -j $(JOBS)

integration: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L integration

# The chaos tests for longer (integration/test_chaos.py, test_chaos_exec.py; make check
# runs them for 30 s and 6 runs).
soak: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && EGRESS_CHAOS_SECONDS=$(SOAK_SECONDS) EGRESS_CHAOS_THREADS=12 \
	  EGRESS_SOURCE_DIR=$(CURDIR) EGRESS_BINARY_DIR=$(CURDIR)/$(BUILD_SAN) \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  python3 $(CURDIR)/integration/test_chaos.py
	cd $(BUILD_SAN) && EGRESS_CHAOS_EXEC_RUNS=60 \
	  EGRESS_SOURCE_DIR=$(CURDIR) EGRESS_BINARY_DIR=$(CURDIR)/$(BUILD_SAN) \
	  python3 $(CURDIR)/integration/test_chaos_exec.py

# The main job: a confined worker reaching an allowlisted origin through egressd.
demo: build
	@sh scripts/demo.sh $(BUILD)

# Installing as root to the real system (no DESTDIR) also sets up what egressd drops to
# after start-up (docs/SECURITY.md): the `egressd` system account and its log directory,
# and the root-only control socket directory. Idempotent: existing ones are kept.
install: build
	cmake --install $(BUILD)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	  if ! getent passwd egressd >/dev/null; then \
	    echo "creating the egressd system user"; \
	    useradd --system --no-create-home --home-dir /nonexistent \
	      --shell /usr/sbin/nologin egressd || exit 1; \
	  fi; \
	  install -d -o egressd -g egressd -m 0750 /var/log/egressd || exit 1; \
	  install -d -o root -g root -m 0755 /run/egressd || exit 1; \
	else \
	  echo "not root or DESTDIR set: create the egressd user and its directories yourself" \
	    "(docs/SECURITY.md)"; \
	fi

# Each libFuzzer harness for a bounded time (CI runs this through `make check`).
fuzz-smoke: deps
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_FUZZ=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS)
	sh scripts/fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS)

fuzz: deps
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_FUZZ=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS)
	sh scripts/fuzz.sh $(BUILD_FUZZ) 600

bench: build
	sh bench/run.sh $(BUILD)

valgrind: deps
	cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=Debug -DEGRESS_TESTING=ON >/dev/null
	cmake --build build-vg -j $(JOBS)
	sh scripts/valgrind.sh build-vg

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) build-vg
