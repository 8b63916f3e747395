# Thin wrapper over CMake. `make demo` and `make test` install dependencies and build first.
JOBS ?= $(shell nproc)
SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: all deps build build-asan test test-unit demo bench clean

all: build

deps:
	bash scripts/deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build -j$(JOBS)

build-asan: deps
	cmake -S . -B build-asan -DKCSI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j$(JOBS)

# Unit and e2e suites in the normal build, then again under ASan+UBSan; fails if either fails.
test: build build-asan
	@ctest --test-dir build --output-on-failure; normal=$$?; \
	$(SANITIZER_ENV) ctest --test-dir build-asan --output-on-failure; sanitized=$$?; \
	exit $$(( normal || sanitized ))

test-unit: build
	ctest --test-dir build -L unit --output-on-failure

demo: build
	bash scripts/demo.sh

# Every benchmark with its defaults; prints figures, never fails on one.
bench: build
	bash scripts/bench.sh

clean:
	rm -rf build build-asan
