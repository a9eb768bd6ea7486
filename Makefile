# rayctl — see README.md. `make run` starts the control plane; `make test` runs every test.

GO        ?= go
BIN_DIR   := _output/bin
RAYCTL    := $(BIN_DIR)/rayctl
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
K8S_VERSION := v1.37.2
K8S_MAJOR := 1
K8S_MINOR := 37
PKG       := github.com/rayctl/rayctl
# The Kubernetes version the binary reports (/version, kubectl version) comes from these stamps.
LDFLAGS   := -s -w -X main.Version=$(VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(K8S_MAJOR) \
	-X k8s.io/component-base/version.gitMinor=$(K8S_MINOR) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(K8S_MAJOR) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(K8S_MINOR)
export CGO_ENABLED := 0
export GOTOOLCHAIN := local

# Unit and integration tests, then the end-to-end suite against the built binary. The suite takes
# about 26 minutes on a 2-core machine (1,522–1,566 s in clean-clone runs of .ci/run): the timeout
# leaves it room, so a slow machine fails a test by its own wait, never the whole package at once.
TEST_TIMEOUT ?= 50m
TEST_FLAGS   ?=

.PHONY: all build run test test-unit test-e2e test-fuzz generate bench lint cross clean ray kuberay-operator peer-apiserver

# The one pinned Ray (hack/ray-version): `make ray` installs it into a venv that `rayctl up` finds beside
# the binary (_output/ray/bin/ray) and runs Ray's images on with the process runtime.
RAY_REQUIREMENT := $(shell cat hack/ray-version)
RAY_VENV        := _output/ray
# The system's Python when there is one: a venv links to the Python it is made from, and one under a
# home dir (pyenv's under /root) is out of reach of the unprivileged user pods run as and of other users.
PYTHON          ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)

all: build

## build: compile rayctl (static) into _output/bin/rayctl, and raysim alone beside it (the raysim image's ray)
build:
	@mkdir -p $(BIN_DIR)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(RAYCTL) ./cmd/rayctl
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/raysim ./cmd/raysim

## run: build, then start the control plane in the foreground (Ctrl-C stops it)
run: build
	$(RAYCTL) up

## ray: a venv under _output/ray with the pinned ray[default] (hack/ray-version); needs Python 3.9+ and PyPI
ray: $(RAY_VENV)/.installed

$(RAY_VENV)/.installed: hack/ray-version
	$(PYTHON) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/pip install --quiet --disable-pip-version-check '$(RAY_REQUIREMENT)'
	$(RAY_VENV)/bin/ray --version
	touch $@

## kuberay-operator: KubeRay's unmodified operator (hack/kuberay-version), built from its Go module through
## the module proxy into _output/tools, for the test that runs it against `rayctl up --controllers=none`
KUBERAY_VERSION  ?= $(shell cat hack/kuberay-version)
KUBERAY_OPERATOR := _output/tools/kuberay-operator-$(KUBERAY_VERSION)

kuberay-operator: $(KUBERAY_OPERATOR)

$(KUBERAY_OPERATOR): hack/kuberay-version
	@mkdir -p $(@D)/gobin-$(KUBERAY_VERSION)
	GOBIN=$(CURDIR)/$(@D)/gobin-$(KUBERAY_VERSION) $(GO) install github.com/ray-project/kuberay/ray-operator@$(KUBERAY_VERSION)
	mv $(@D)/gobin-$(KUBERAY_VERSION)/ray-operator $@
	rmdir $(@D)/gobin-$(KUBERAY_VERSION)

## test: every test — unit, integration and end-to-end (starts rayctl up as a process)
test: build
	RAYCTL_BIN=$(CURDIR)/$(RAYCTL) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)
	cd bench/report && $(GO) test -count=1 ./...

# RACE_PKGS are tested again under the race detector (which needs cgo, so a C compiler: .ci/run installs
# gcc): their tests are about what runs at once (the OpenAPI documents built while the server serves).
RACE_PKGS := ./pkg/apiserver/lazyopenapi/

## test-unit: the fast tests only (no end-to-end suite)
test-unit:
	$(GO) test -count=1 $(TEST_FLAGS) $$($(GO) list ./... | grep -v /test/e2e)
	cd bench/report && $(GO) test -count=1 ./...

## test-e2e: the end-to-end suite only
test-e2e: build
	RAYCTL_BIN=$(CURDIR)/$(RAYCTL) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/...

## test-fuzz: run each fuzz target for a number of executions (FUZZTIME, default 10000x)
# A count, not a duration: with a duration, Go's fuzzing coordinator can wake on its deadline before
# the workers' context (a child of it) is cancelled, and then reports "context deadline exceeded" as
# a failure with no failing input (go.dev/issue/75804, fixed in Go 1.27; seen on a loaded 2-core
# runner). A count sets no deadline. The inputs of the seed corpus and of the cached one count too.
FUZZTIME ?= 10000x
# Minimizing a new interesting input also stops on a count, not a clock.
FUZZMINTIME ?= 50x
FUZZ_TARGETS := \
	./pkg/apiserver/validation:FuzzValidatePod \
	./pkg/apiserver/validation:FuzzValidateService \
	./pkg/apiserver/validation:FuzzValidateJob \
	./pkg/controllers/ray/raycluster:FuzzRayCluster

test-fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINTIME) $$pkg; \
	done

## generate: regenerate OpenAPI definitions and the Ray CRDs (files are committed)
generate:
	bash hack/generate.sh

## bench: start-up and memory, pod start, RayJob apply->Complete, API load, trigger chain, beside a kube-apiserver
## peer, many RayClusters at once, a ClusterIP's and the NAT's cost per connection (root and rootless); tables, JSON, plots and an index
## (README.md) in bench/results/. SUITE=scale (or startup, pods, rayjob, load, chain, peers, egress, services) runs one suite (the peer also needs Debian's etcd-server:
## apt-get install etcd-server). bench/report draws the plots: a module of its own, keeping gonum/plot out of go.mod.
## BENCH_ARGS adds flags, e.g. BENCH_ARGS="-startup-cpuprofile _output/profiles -heap-profiles _output/profiles -scale-cpuprofile _output/profiles" keeps
## the profiles that show what holds the memory and where the CPU goes (go run ./bench -h lists them all).
SUITE ?= all
BENCH_ARGS ?=

bench: build $(if $(filter all peers,$(SUITE)),peer-apiserver)
	$(GO) run ./bench -rayctl $(CURDIR)/$(RAYCTL) -kube-apiserver $(CURDIR)/$(PEER_APISERVER) -out bench/results -suite $(SUITE) $(BENCH_ARGS)
	cd bench/report && $(GO) run . -results $(CURDIR)/bench/results

## peer-apiserver: kube-apiserver of k8s.io/kubernetes $(K8S_VERSION), built from its Go module (bench/peers/go.mod pins
## its staging modules to their published versions) into _output/tools, for `make bench`'s suite peers
PEER_APISERVER := _output/tools/kube-apiserver-$(K8S_VERSION)

peer-apiserver: $(PEER_APISERVER)

$(PEER_APISERVER): bench/peers/go.mod
	@mkdir -p $(@D)
	cd bench/peers && $(GO) build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)' -o $(CURDIR)/$@ k8s.io/kubernetes/cmd/kube-apiserver

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench/report && $(GO) vet ./...

## cross: check that rayctl builds for macOS (arm64, amd64) and Linux arm64 (the process runtime is the laptops'
## path), and that go vet passes for macOS (tests included). CGO is off; no -trimpath, so the vet and the
## build of darwin/arm64 share their compiled packages.
CROSS_PLATFORMS := darwin/arm64 darwin/amd64 linux/arm64
CROSS_VET       := darwin/arm64
cross:
	@set -e; for p in $(CROSS_VET); do \
		echo "go vet ./... for $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./...; \
	done; \
	for p in $(CROSS_PLATFORMS); do \
		echo "go build ./cmd/rayctl for $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null ./cmd/rayctl; \
	done

clean:
	rm -rf _output
