# Thin wrapper over CMake. `make demo` and `make test` install dependencies and build first.
JOBS ?= $(shell nproc)
# Every tree compiles through ccache (scripts/deps.sh installs it): make test builds five trees, and
# a clone in another folder (CI's) hits the cache with paths taken relative to this folder.
LAUNCHER = -DCMAKE_C_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

# The peers nobody here wrote (upstream sidecars, csi-sanity, Kubernetes v1.37.2, etcd), built from
# their Go modules as tests/peers/go.mod pins them, cached outside the tree; see scripts/peers.sh.
.PHONY: all deps peers build build-asan build-release build-clang build-fuzz fuzz test test-stress test-unit test-faults test-k8s-e2e demo bench images clean

all: build

deps:
	bash scripts/deps.sh

peers: deps
	bash scripts/peers.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LAUNCHER)
	cmake --build build -j$(JOBS)

build-asan: deps
	cmake -S . -B build-asan -DKCSI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(LAUNCHER)
	cmake --build build-asan -j$(JOBS)

# Build-only checks packagers and other toolchains meet: gcc -O3 Release, and clang.
build-release: deps
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release $(LAUNCHER)
	cmake --build build-release -j2

build-clang: deps
	CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LAUNCHER)
	cmake --build build-clang -j2

# libFuzzer harnesses (tests/fuzz) under ASan+UBSan, clang only.
build-fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DKCSI_FUZZ=ON -DKCSI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(LAUNCHER)
	cmake --build build-fuzz -j$(JOBS) --target $$(sed -n 's/^kcsi_fuzzer(\([a-z_]*\).*/\1/p' tests/fuzz/CMakeLists.txt)

# Each harness for FUZZ_SECONDS (default 60); fails on a crash. See docs/development.md.
FUZZ_SECONDS ?= 60
fuzz: build-fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh build-fuzz

# Unit and e2e suites of the normal and the ASan+UBSan build in one ctest (scripts/test.sh): the
# timing tests first, 2 at a time, with the peers, the Release, clang and fuzz trees and the 20 s
# fuzz smoke run built and run at nice 19 beside them; then the rest, 4 at a time. The Release and
# clang builds are build-only checks. Fails if any fails.
test: build build-asan
	bash scripts/test.sh

# The same with two CPU hogs (`yes`) beside it: what a loaded CI machine does to the timing. The
# phases run one after the other (the hogs would starve the nice-19 phase of make test).
test-stress: build build-asan
	KCSI_TEST_STRESS=2 bash scripts/test.sh

test-unit: build
	ctest --test-dir build -L unit --output-on-failure

# The fault scenarios between hosts alone (docs/faults.md), the real kube-controller-manager's runs
# included; make test runs all but those (label faults-real).
test-faults: build peers
	ctest --test-dir build -L faults --output-on-failure

# Kubernetes' own storage e2e suite (e2e.test, "External Storage" specs of tests/k8s-e2e/loop.yaml)
# on a real control plane and kubelet: once with kcsi's sidecars, once with upstream's (images
# made here from the peers), then every spec's outcome compared. See tests/k8s-e2e/run.sh.
test-k8s-e2e: build
	bash tests/k8s-e2e/run.sh --sidecars kcsi; k=$$?; \
	bash tests/k8s-e2e/run.sh --sidecars upstream; \
	python3 tests/k8s-e2e/compare.py build/k8s-e2e/kcsi/junit.xml build/k8s-e2e/upstream/junit.xml && \
	[ $$k = 0 ]

demo: build
	bash scripts/demo.sh

# One OCI image per component (FROM scratch, buildah, no daemon) from the Release build, saved as
# build/images/<component>.oci.tar; prints the size table. See docs/deploy.md.
images: build-release
	bash scripts/images.sh build-release/bin build/images

# Every benchmark with its defaults; prints figures, never fails on one.
bench: build
	bash scripts/bench.sh

clean:
	rm -rf build build-asan build-release build-clang build-fuzz build-peers build-tests
