# dlock — the two set-up commands of the README, and the developer targets.
#   make test   install missing Debian packages, build, run unit + integration tests
#   make demo   install, build, run the flash-sale demo on a throwaway redis-server
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build test unit integration demo clean test-asan test-tsan

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 300

unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

integration: build
	cd $(BUILD) && ctest --output-on-failure -L integration -j 2

# The suite under ASan+UBSan and under TSan, built with clang into build-asan/ and build-tsan/.
test-asan:
	@scripts/install-deps sanitizers
	JOBS=$(JOBS) scripts/sanitize asan

test-tsan:
	@scripts/install-deps sanitizers
	JOBS=$(JOBS) scripts/sanitize tsan

demo: build
	scripts/demo $(BUILD)

# Benchmarks (not part of make test): see docs/BENCHMARKS.md.
BENCH_BUILD ?= build-bench
BENCH_ARGS ?=
.PHONY: bench bench-peers bench-report bench-build bench-peer-deps bench-instructions
bench-build:
	@scripts/install-deps bench
	cmake -S . -B $(BENCH_BUILD) -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_BENCH=ON \
	  -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_CLI=OFF -DDLOCK_BUILD_EXAMPLES=OFF
	cmake --build $(BENCH_BUILD) -j $(JOBS) --target dlock_bench dlock_bench_pairs
bench: bench-build
	scripts/bench $(BENCH_BUILD) $(BENCH_ARGS)
bench-peer-deps:
	@scripts/install-deps bench peers
	@cd bench/peers && { npm install --no-audit --no-fund --no-package-lock --omit=dev --loglevel=error \
	  || echo "bench-peers: npm install failed (registry unreachable?): node-redlock will be skipped"; }
bench-peers: bench-build bench-peer-deps
	scripts/bench $(BENCH_BUILD) --peers $(BENCH_ARGS)
bench-report: bench-build bench-peer-deps
	scripts/bench $(BENCH_BUILD) --report $(BENCH_ARGS)
# The client's own instructions per acquire+release pair, counted by callgrind: the one figure
# of the bench that barely drifts with the host (idle: within 0.5%; docs/BENCHMARKS.md).
# KIND=reentrant|fair|write|read|semaphore|multi counts that lock instead of a Mutex.
KIND ?= mutex
bench-instructions: bench-build
	scripts/bench $(BENCH_BUILD) --instructions --kind $(KIND)

clean:
	rm -rf $(BUILD)

# Soak (not part of make test, not in CI): SOAK_SECONDS (default 600) of mixed workload with
# periodic faults; reports acquisitions, faults, violations and client memory. See scripts/soak.
SOAK_SECONDS ?= 600
.PHONY: soak
soak: deps $(BUILD)/CMakeCache.txt
	SOAK_SECONDS=$(SOAK_SECONDS) BUILD=$(BUILD) JOBS=$(JOBS) scripts/soak

# libFuzzer targets (not part of make test): each runs FUZZ_SECONDS (default 60) from its corpus
# in fuzz/corpus/, built with clang + ASan/UBSan into build-fuzz/; see fuzz/README.md.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	@scripts/install-deps fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/fuzz
