# speclet — see README.md. `make run` and `make test` install what they need.
SHELL := /bin/bash
GO    ?= go
# Debian packages the tests, `make run` and `make docs` need.
# libseccomp-dev, gcc, libc6-dev and pkg-config build runc for RUNTIME=containerd-2.
DEB_PKGS := containerd runc etcd-server containernetworking-plugins busybox-static graphviz iproute2 ca-certificates chromium e2fsprogs mount libseccomp-dev gcc libc6-dev pkg-config
TEST_TIMEOUT ?= 25m
# Test artifacts (the web UI's screenshot) are kept here, outside the repository.
ARTIFACTS ?= $(or $(TMPDIR),/tmp)/speclet-test-artifacts
FUZZTIME ?= 10s
# timed runs step $(1) of a recipe, the shell command $(2), and prints
# "step <name>: <seconds> s" (", failed" when it failed) with its status, so
# that a CI log says where the time of `make test` went.
timed = s=$$(date +%s); ( $(2) ); rc=$$?; echo "step $(1): $$(( $$(date +%s) - s )) s$$( [ $$rc = 0 ] || echo ', failed')"; exit $$rc

.PHONY: all deps generate check fmt vet layering fresh verify test unit kubelet-binary bench docs run clean chaos soak conformance conformance-record cluster kube-binaries metrics-server-binary runtimes node-conformance node-conformance-binaries node-e2e sample-device-plugin

all: check

# deps installs missing Debian packages (as root, with apt-get) and Go modules. Idempotent.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: Debian packages present ($(DEB_PKGS))"; \
	elif [ "$$(id -u)" != 0 ]; then echo "deps: missing Debian packages:$$missing — run as root to install them; tests that need them will skip"; \
	else echo "deps: installing Debian packages:$$missing (apt-get)"; \
	  s=$$(date +%s); apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null && echo "deps: installed$$missing ($$(( $$(date +%s) - s )) s)"; \
	fi
	@echo "deps: downloading Go modules (go mod download)"; $(call timed,go mod download,$(GO) mod download)

generate:
	$(GO) generate ./...

fmt:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi; echo "fmt: ok"

vet:
	@$(call timed,vet,$(GO) vet ./...)

layering:
	@$(call timed,layering,$(GO) test ./test -run 'TestLayering|TestPackageTable|TestReadPackageTable|TestEngineFileSize|TestLongFiles' -count=1)

# fresh fails when `go generate ./...` changes or adds a file.
fresh:
	@before=$$(git status --porcelain); $(GO) generate ./...; after=$$(git status --porcelain); \
	if [ "$$before" != "$$after" ]; then echo "go generate ./... left a diff; run 'make generate' and commit:"; \
	  diff <(echo "$$before") <(echo "$$after"); git diff --stat; exit 1; fi; echo "fresh: generated code is up to date"

# verify explores every reachable state of a pod with 1..3 containers and
# checks the invariants of spec/system.hcl; a violation prints its trace.
verify:
	@$(call timed,spec verify,$(GO) run ./cmd/speclet spec verify)

check: fmt vet layering fresh verify

# unit runs every test (real containerd included when root) without the checks.
# test/nodee2e's fast subset runs on its own, after the packages: its node
# and test/nodeconformance's share kubelet's /var/log/pods, whose pod log
# directories each agent sweeps as orphans when it does not know the pod.
# The engine package, engine/devicemanager (the device plugin machine's rows)
# and the engine's tests on containerd (engine/containerdtest) run on their
# own, one after the other, in go test's local directory mode so that their
# TestMain output shows even when they pass: each records what its tests
# took and called in one new directory (SPECLET_ENGINE_SUITE), and the last
# prints the row coverage table of the spec and the CRI audit over all engine
# tests, and fails when a row was never taken (engine/doc.go, # Tests).
#
# The CRI contract (package cri's TestContract) and engine/containerdtest
# then run once more on containerd 2.x (SPECLET_RUNTIME=containerd-2,
# cri/harness), whose binaries `make runtimes` builds.
unit: kube-binaries metrics-server-binary node-conformance-binaries runtimes kubelet-binary sample-device-plugin
	@mkdir -p $(ARTIFACTS) && echo "unit: test artifacts (screenshots) go to $(ARTIFACTS)"
	@$(call timed,packages,$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -artifacts -outputdir $(ARTIFACTS) $$($(GO) list ./... | grep -v -e '/speclet/engine$$' -e '/speclet/engine/devicemanager$$' -e '/speclet/engine/containerdtest$$' -e '/test/chaos$$' -e '/test/nodee2e$$'))
	@$(call timed,node e2e fast subset,$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/nodee2e)
	@suite=$$(mktemp -d) && trap 'rm -rf "$$suite"' EXIT && \
	  $(call timed,engine and engine/containerdtest,(cd engine && SPECLET_ENGINE_SUITE=$$suite $(GO) test -count=1 -timeout $(TEST_TIMEOUT)) && \
	  (cd engine/devicemanager && SPECLET_ENGINE_SUITE=$$suite $(GO) test -count=1 -timeout $(TEST_TIMEOUT)) && \
	  (cd engine/containerdtest && SPECLET_ENGINE_SUITE=$$suite $(GO) test -count=1 -timeout $(TEST_TIMEOUT)))
	@$(call timed,CRI contract and engine/containerdtest on containerd-2,SPECLET_RUNTIME=containerd-2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestContract$$' ./cri && \
	  SPECLET_RUNTIME=containerd-2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./engine/containerdtest)
	@$(call timed,chaos,$(GO) test -count=1 -timeout 15m ./test/chaos)
	@$(call timed,fuzz,$(GO) test ./spec -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME))

test: deps check unit

# chaos is the full chaos suite (test/chaos): 50 pods churned for 10 minutes on
# a real containerd while speclet is killed with SIGKILL, containerd restarts
# twice and CRI calls fail through a fault-injecting proxy. `make test` runs a
# 2-minute version. Rerun a seed with `make chaos SEED=N`.
chaos: deps
	$(GO) test -count=1 -timeout 40m -v -run '^TestChaos$$' ./test/chaos -args -chaos.full $(if $(SEED),-chaos.seed $(SEED))

# soak churns 100 pods for 10 minutes on the simulated runtime and prints the
# daemon's heap and goroutines every 30 s, then churns 50 pods for 3 minutes
# under a connection flood on both ports (6,000 connections each, in rounds)
# at a 4,096 file descriptor limit and prints /healthz and new-pod latencies,
# fds and RSS (TestSoakFlood; docs/performance.md). SOAK_RUN=TestSoakFlood
# runs one of them.
SOAK_RUN ?= TestSoak|TestSoakFlood
soak:
	$(GO) test -count=1 -timeout 40m -v -run '^($(SOAK_RUN))$$' ./test/chaos -args -soak

# bench runs every benchmark. It builds the control plane first for
# test/cluster's BenchmarkAPIBurst (speclet and kubelet v1.34 under one API
# server), and kubelet for BenchmarkProbeCost (test/conformance), which
# compares speclet's probe cost with kubelet's; both are cached by version.
bench: deps kube-binaries
	@kubelet=$$($(GO) run ./test/conformance/cmd/buildkubelet -version $(KUBELET_VERSION)) && echo "bench: kubelet $$kubelet" && \
	SPECLET_KUBELET="$$kubelet" $(GO) test -run '^$$' -bench . -benchmem -timeout 120m ./...

docs: deps generate
	@for f in docs/states/*.dot; do dot -Tsvg "$$f" -o "$${f%.dot}.svg" && echo "docs: $${f%.dot}.svg"; done

# RUNTIME chooses the container runtime of `make run` and `make cluster`
# (cri/harness's SPECLET_RUNTIME): containerd-2 (containerd v2.4.2 and runc
# v1.5.3 built from their Go modules by `make runtimes`; the default) or
# containerd-1.6 (Debian's containerd 1.6.20 and runc 1.1.5). The tests run
# on containerd-1.6 unless SPECLET_RUNTIME says otherwise.
RUNTIME ?= containerd-2
RUNTIME_BUILD := $(if $(filter containerd-2,$(RUNTIME)),runtimes)
# The suites that compare speclet with kubelet (conformance,
# node-conformance, node-e2e) run both agents on containerd-1.6, the runtime
# their recorded verdicts were taken on and `make test`'s fast subsets run
# on, unless RUNTIME is given: make node-e2e RUNTIME=containerd-2. Only a
# run on containerd-1.6 re-records kubelet's verdicts and the docs' tables;
# on another runtime the comparison is printed and left in the out dir.
SUITE_RUNTIME := $(if $(filter file,$(origin RUNTIME)),containerd-1.6,$(RUNTIME))
SUITE_RUNTIME_BUILD := $(if $(filter containerd-2,$(SUITE_RUNTIME)),runtimes)
SUITE_RECORD = $(filter containerd-1.6,$(SUITE_RUNTIME))

# run starts speclet on a private containerd (installed when missing) with the
# pods of examples/pods; Ctrl-C stops it and removes everything. Extra flags
# for `speclet run`: make run RUN_ARGS="-v 4"; Debian's containerd 1.6:
# make run RUNTIME=containerd-1.6.
RUN_BIN := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/speclet/bin
# SPECLET_LDFLAGS set speclet's own version (git describe, or the short
# commit) in every build of cmd/speclet here; `speclet version` and the
# Node's kubeletVersion report v1.34.4+speclet.<it> (cmd/speclet/version.go).
SPECLET_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
SPECLET_LDFLAGS := -ldflags "-X main.buildVersion=$(SPECLET_VERSION)"
run: deps $(RUNTIME_BUILD)
	@mkdir -p $(RUN_BIN) && $(GO) build $(SPECLET_LDFLAGS) -o $(RUN_BIN)/speclet ./cmd/speclet && $(GO) build -o $(RUN_BIN)/speclet-dev ./cmd/speclet-dev
	@SPECLET_RUNTIME=$(RUNTIME) $(RUN_BIN)/speclet-dev --speclet $(RUN_BIN)/speclet --pod-manifest-path examples/pods -- $(RUN_ARGS)

clean:
	$(GO) clean -testcache

# kube-binaries builds the control plane test/cluster runs (kube-apiserver,
# kube-scheduler, kube-controller-manager, kubectl) from the Go module
# k8s.io/kubernetes, once, into ~/.cache/speclet/kube/$(KUBE_VERSION)/.
# About 10 minutes cold on two cores; a stat when cached.
KUBE_VERSION ?= v1.34.4
kube-binaries:
	@start=$$(date +%s); dir=$$($(GO) run ./test/cluster/cmd/buildkube -version $(KUBE_VERSION)) && \
	echo "kube-binaries: $$dir ($$(( $$(date +%s) - start )) s)"

# metrics-server-binary builds metrics-server v0.8.0 (cluster.MetricsServerVersion)
# from its Go module sigs.k8s.io/metrics-server, once, into
# ~/.cache/speclet/metrics-server/<version>/ (13 minutes cold on two busy cores, a stat when cached):
# `make cluster` runs it (kubectl top) and test/cluster's TestCluster checks
# kubectl top against it.
metrics-server-binary:
	@start=$$(date +%s); bin=$$($(GO) run ./test/cluster/cmd/buildkube -metrics-server) && \
	echo "metrics-server-binary: $$bin ($$(( $$(date +%s) - start )) s)"

# kubelet-binary builds kubelet $(KUBELET_VERSION) from k8s.io/kubernetes,
# once, into ~/.cache/speclet/kubelet/$(KUBELET_VERSION)/ (a stat when cached):
# `make test` needs it for test/conformance's agent swaps (kubelet's static
# pods adopted by speclet and speclet's by kubelet); make conformance and
# the node suites build and use the same binary as their oracle.
kubelet-binary:
	@start=$$(date +%s); bin=$$($(GO) run ./test/conformance/cmd/buildkubelet -version $(KUBELET_VERSION)) && \
	echo "kubelet-binary: $$bin ($$(( $$(date +%s) - start )) s)"

# sample-device-plugin builds Kubernetes' sample device plugin
# (test/images/sample-device-plugin of k8s.io/kubernetes $(KUBE_VERSION)),
# once, into ~/.cache/speclet/sample-device-plugin/$(KUBE_VERSION)/ (a stat
# when cached): `make test` runs it beside a speclet node (test/deviceplugin).
sample-device-plugin:
	@start=$$(date +%s); bin=$$($(GO) run ./test/deviceplugin/cmd/buildsampleplugin -version $(KUBE_VERSION)) && \
	echo "sample-device-plugin: $$bin ($$(( $$(date +%s) - start )) s)"

# runtimes builds the binaries of RUNTIME=containerd-2 (containerd and its
# runc shim, and runc, at the versions cri/harness pins) from their Go
# modules, once, into ~/.cache/speclet/containerd/<version>/ and
# ~/.cache/speclet/runc/<version>/ (docs/operations.md, # Container
# runtimes). Several minutes cold on two cores; a stat when cached.
runtimes:
	@start=$$(date +%s); out=$$($(GO) run ./cri/harness/cmd/buildruntime) && \
	echo "$$out" | sed 's/^/runtimes: /' && echo "runtimes: $$(( $$(date +%s) - start )) s"

# cluster runs a control plane and two speclet nodes, each on its own
# containerd, and prints the export line for KUBECONFIG; Ctrl-C stops
# everything and leaves nothing behind. Extra flags for `speclet run`:
# make cluster RUN_ARGS="-v 4". HOLLOW=N adds N hollow nodes hollow-0..N-1
# (one `speclet hollow` process; docs/operations.md). The nodes run on
# RUNTIME (see run). metrics-server runs beside them (kubectl top; add
# CLUSTER_ARGS=--metrics-server=false to go without it).
HOLLOW ?= 0
cluster: deps kube-binaries metrics-server-binary $(RUNTIME_BUILD)
	@mkdir -p $(RUN_BIN) && $(GO) build $(SPECLET_LDFLAGS) -o $(RUN_BIN)/speclet ./cmd/speclet && $(GO) build -o $(RUN_BIN)/speclet-cluster ./test/cluster/cmd/cluster
	@SPECLET_RUNTIME=$(RUNTIME) $(RUN_BIN)/speclet-cluster --speclet $(RUN_BIN)/speclet --version $(KUBE_VERSION) --hollow $(HOLLOW) $(CLUSTER_ARGS) -- $(RUN_ARGS)

# conformance runs the whole corpus of test/conformance/testdata/scenarios on
# upstream kubelet and on speclet, each on its own containerd, prints
# "conformance: N of M scenarios match" with a verdict per scenario, and
# rewrites kubelet's recorded results in test/conformance/testdata/kubelet
# (what `go test ./...` compares speclet with). The kubelet binary is built
# once and cached in ~/.cache/speclet/kubelet/$(KUBELET_VERSION)/kubelet.
# Not part of `make test`. CONFORMANCE_RUN=regexp selects scenarios.
KUBELET_VERSION ?= v1.34.4
CONFORMANCE_POOL ?= 6
CONFORMANCE_OUT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/speclet/conformance
conformance: deps $(SUITE_RUNTIME_BUILD)
	@kubelet=$$($(GO) run ./test/conformance/cmd/buildkubelet -version $(KUBELET_VERSION)) && echo "conformance: kubelet $$kubelet, runtime $(SUITE_RUNTIME)" && \
	SPECLET_RUNTIME=$(SUITE_RUNTIME) $(GO) test ./test/conformance -run '^TestConformance$$' -count=1 -timeout 90m -v \
	  -conformance.kubelet "$$kubelet" $(if $(SUITE_RECORD),-conformance.record) -conformance.pool $(CONFORMANCE_POOL) \
	  -conformance.out $(CONFORMANCE_OUT) $(if $(CONFORMANCE_RUN),-conformance.run '$(CONFORMANCE_RUN)') \
	  | grep -v -E '^(=== RUN|--- PASS|PASS$$|ok )'; \
	status=$${PIPESTATUS[0]}; echo "conformance: report and every result in $(CONFORMANCE_OUT)"; exit $$status

# conformance-record is the one command that re-records kubelet's results
# (make conformance always does).
conformance-record: conformance

# node-conformance-binaries builds e2e.test, e2e_node.test, the ginkgo CLI
# and the test images' programs (agnhost, nonewprivs) of k8s.io/kubernetes,
# once, into ~/.cache/speclet/e2e/$(KUBE_VERSION)/ (test/nodeconformance).
# `make test` needs them for the fast subsets of node conformance and node e2e.
node-conformance-binaries:
	@start=$$(date +%s); dir=$$($(GO) run ./test/nodeconformance/cmd/buildnodeconf -version $(KUBE_VERSION)) && \
	echo "node-conformance-binaries: $$dir ($$(( $$(date +%s) - start )) s)"

# node-conformance runs the [NodeConformance] specs of Kubernetes' e2e suite
# (test/e2e/common/node and common/storage of k8s.io/kubernetes
# $(KUBE_VERSION)) on speclet nodes, then on kubelet $(KUBELET_VERSION) nodes
# (the oracle), each under its own control plane, prints
# "node conformance: speclet P of N, kubelet K of N" and the differences,
# re-records kubelet's verdicts in test/nodeconformance/testdata/kubelet.txt
# (what the fast subset of `make test` compares speclet with) and rewrites
# the results table of docs/node-conformance.md. Not part of `make test`.
#   NODECONF_FOCUS=regexp   only the specs whose name it matches
#   NODECONF_AGENTS=speclet only speclet (or kubelet)
#   NODECONF_PROCS=N        parallel Ginkgo processes (default 5)
#   NODECONF_OUT=dir        verdicts, JUnit, Ginkgo reports and every log
NODECONF_AGENTS ?= speclet,kubelet
NODECONF_PROCS ?= 5
NODECONF_OUT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/speclet/nodeconf
node-conformance: deps kube-binaries node-conformance-binaries $(SUITE_RUNTIME_BUILD)
	@mkdir -p $(RUN_BIN) && $(GO) build -o $(RUN_BIN)/speclet-nodeconf ./test/nodeconformance/cmd/nodeconf && \
	echo "node-conformance: runtime $(SUITE_RUNTIME)" && SPECLET_RUNTIME=$(SUITE_RUNTIME) \
	$(RUN_BIN)/speclet-nodeconf -agents '$(NODECONF_AGENTS)' -procs $(NODECONF_PROCS) -out '$(NODECONF_OUT)' -version $(KUBE_VERSION) \
	  $(if $(NODECONF_FOCUS),-focus '$(NODECONF_FOCUS)',$(if $(SUITE_RECORD),-record test/nodeconformance/testdata/kubelet.txt -doc docs/node-conformance.md))

# node-e2e runs the [NodeConformance] specs of Kubernetes' node e2e suite
# (e2e_node.test of k8s.io/kubernetes $(KUBE_VERSION), test/nodee2e) on one
# speclet node, then on one kubelet $(KUBELET_VERSION) node (the oracle), each
# under its own control plane and serving its API on a veth address the run
# makes; first the specs without [Serial] (NODE_E2E_PROCS at a time), then the
# [Serial] ones. Prints "node e2e: speclet P of N, kubelet K of N" and the
# differences, re-records kubelet's verdicts in test/nodee2e/testdata/kubelet.txt
# and rewrites the results table of docs/node-e2e.md. Not part of `make test`.
#   NODE_E2E_FOCUS=regexp   only the specs whose name it matches
#   NODE_E2E_AGENTS=speclet only speclet (or kubelet)
#   NODE_E2E_PASSES=parallel only the specs without [Serial] (or serial)
#   NODE_E2E_PROCS=N        parallel Ginkgo processes (default 4)
#   NODE_E2E_OUT=dir        verdicts, JUnit, Ginkgo reports and every log
#   NODE_E2E_MERGE=1        with NODE_E2E_FOCUS: merge kubelet's verdicts of the
#                           specs that ran into test/nodee2e/testdata/kubelet.txt
NODE_E2E_AGENTS ?= speclet,kubelet
NODE_E2E_PASSES ?= parallel,serial
NODE_E2E_PROCS ?= 4
NODE_E2E_OUT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/speclet/nodee2e
node-e2e: deps kube-binaries node-conformance-binaries $(SUITE_RUNTIME_BUILD)
	@mkdir -p $(RUN_BIN) && $(GO) build -o $(RUN_BIN)/speclet-nodee2e ./test/nodee2e/cmd/nodee2e && \
	echo "node-e2e: runtime $(SUITE_RUNTIME)" && SPECLET_RUNTIME=$(SUITE_RUNTIME) \
	$(RUN_BIN)/speclet-nodee2e -agents '$(NODE_E2E_AGENTS)' -passes '$(NODE_E2E_PASSES)' -procs $(NODE_E2E_PROCS) -out '$(NODE_E2E_OUT)' -version $(KUBE_VERSION) \
	  $(if $(SUITE_RECORD),$(if $(NODE_E2E_FOCUS),-focus '$(NODE_E2E_FOCUS)' $(if $(NODE_E2E_MERGE),-record test/nodee2e/testdata/kubelet.txt -merge),-record test/nodee2e/testdata/kubelet.txt -doc docs/node-e2e.md),$(if $(NODE_E2E_FOCUS),-focus '$(NODE_E2E_FOCUS)'))
