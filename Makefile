# Convenience front end over CMake. The two quick-start commands are `make demo` and
# `make check`; both install missing Debian packages first (scripts/deps.sh), each only the
# set it needs: build and install the build (and runtime) set, demo adds curl and python3,
# the test targets install everything, the test peers disabled (deps.sh).
BUILD      ?= build
BUILD_SAN  ?= build-san
BUILD_FUZZ ?= build-fuzz
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 20

SOAK_SECONDS ?= 600

.PHONY: all deps deps-build deps-runtime deps-demo bench-deps build check unit integration soak demo install fuzz-smoke fuzz bench bench-quick bench-goals bench-idle valgrind clean \
	soak-candidate

all: build

# deps: the whole test set (make check, .ci/run); the others install one set each.
deps:
	@sh scripts/deps.sh test
deps-build:
	@sh scripts/deps.sh build
deps-runtime:
	@sh scripts/deps.sh runtime
deps-demo:
	@sh scripts/deps.sh demo

# Plain optimized build (no sanitizers, no test seams: EGRESS_TESTING=OFF); what install
# installs.
build: deps-build
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DEGRESS_TESTING=OFF >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite under ASan+UBSan: unit tests, integration tests, fuzz smoke.
check: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600 -LE soak
	$(MAKE) --no-print-directory fuzz-smoke

unit: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L unit -j $(JOBS)

integration: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON -DEGRESS_TESTING=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L integration -LE soak

# The candidate property test with many more seeds than `make check` runs (50):
# SEEDS=N SEED_BASE=M to choose; each seed is one real `egress-exec run` (root).
SOAK_SEEDS ?= 1000
soak-candidate: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DEGRESS_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	EGRESS_BINARY_DIR=$(abspath $(BUILD_SAN)) SEEDS=$(SOAK_SEEDS) SEED_BASE=$${SEED_BASE:-1001} \
	  python3 integration/test_candidate_roundtrip.py

# The chaos tests for longer (integration/test_chaos.py, test_chaos_exec.py; make check
# runs test_chaos for 30 s of chaos and test_chaos_exec with 6 runs).
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
demo: deps-demo build
	@sh scripts/demo.sh $(BUILD)

# Installing as root to the real system (no DESTDIR) also sets up what egressd drops to
# after start-up (docs/SECURITY.md): the `egressd` system account and its log directory,
# and the root-only control socket directory. Idempotent: existing ones are kept.
install: deps-runtime build
	cmake --install $(BUILD)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	  if ! getent passwd egressd >/dev/null; then \
	    echo "creating the egressd system user"; \
	    useradd --system --no-create-home --home-dir /nonexistent \
	      --shell /usr/sbin/nologin egressd || exit 1; \
	  fi; \
	  install -d -o egressd -g egressd -m 0750 /var/log/egressd || exit 1; \
	  install -d -o root -g root -m 0755 /run/egressd || exit 1; \
	  install -d -o root -g root -m 0700 /var/lib/egressd || exit 1; \
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

# The benchmark (docs/performance.md): not part of `make check`. Its peers and tools are a
# separate package set (scripts/deps.sh bench); their services are never left enabled.
bench-deps:
	@sh scripts/deps.sh bench

# Full run (~10 min on an idle 2-core machine); writes the table into docs/performance.md.
bench: bench-deps build
	sh bench/run.sh $(BUILD)
	sh bench/collector.sh $(BUILD)
	sh bench/model.sh $(BUILD)

# Quick run (< 3 min): one round, small counts; prints the table, does not touch the docs.
bench-quick: bench-deps build
	BENCH_QUICK=1 sh bench/run.sh $(BUILD)

# The goal figures only (latency, transactions/s, CPU per transaction; egressd, the relay,
# the peers) over 15 interleaved rounds of one repetition (~9 min): units farther apart in
# time than a full run's repetitions; writes its own block of docs/performance.md.
bench-goals: bench-deps build
	BENCH_GOALS=1 sh bench/run.sh $(BUILD)

# 100,000 idle tunnels held through egressd and the bare relay (bench/idle_hold.sh).
bench-idle: bench-deps build
	sh bench/idle_hold.sh $(BUILD)

valgrind: deps
	cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=Debug -DEGRESS_TESTING=ON >/dev/null
	cmake --build build-vg -j $(JOBS)
	sh scripts/valgrind.sh build-vg

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) build-vg
