# dlock — the two set-up commands of the README, and the developer targets.
#   make test   install missing Debian packages, build, run unit + integration tests
#   make demo   install, build, run the flash-sale demo on a throwaway redis-server
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build test unit integration demo clean

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

demo: build
	scripts/demo $(BUILD)

clean:
	rm -rf $(BUILD)
