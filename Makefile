# kvrouter — see README.md. Every target installs or builds what it needs.
GO        ?= go
# Fuzz budget per target, as a count of executions ("Nx"), not a duration:
# a duration races the fuzzing coordinator's deadline against its workers on a
# loaded machine (go.dev/issue/75804, fixed in Go 1.27) and fails with
# "context deadline exceeded" and no crasher. A count only runs slower.
FUZZTIME  ?= 20000x
# Packages whose tests run with the race detector (everything, while the
# suite is small enough for 2 cores).
RACE_PKGS ?= ./...
# Every build without the race detector — vet, the multi-member tests, the
# binaries tests start, check-static, Helm — uses one configuration, the
# container image's (CGO_ENABLED=0), so a cold `make test` compiles the
# dependencies twice (that and the race run, which needs cgo and sets
# CGO_ENABLED=1 for itself) instead of once per setting.
export CGO_ENABLED ?= 0
# Tests run at once within one package by the multi-member steps: they
# spend their time in protoactor-go's fixed sleeps (a second to start a
# member, two to leave), not on the CPU.
MEMBER_PARALLEL ?= 4

.PHONY: all build run test vet fmt-check fuzz-smoke fuzz bench clean

all: build

build:
	$(GO) build -o bin/kvrouter ./cmd/kvrouter
	$(GO) build -o bin/kvrouter-bench ./cmd/kvrouter-bench

# The main job: kvrouter (listeners, index, HTTP API, OpenAI proxy) and 4
# simulated engines on loopback, a slice of the Mooncake conversation trace
# streamed through the proxy; ends with kvrouter's hit rate next to random
# routing's and the time to first token.
run: build
	./bin/kvrouter demo

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Unit tests (with -race; the fuzz seed corpora run as ordinary tests),
# then at once — they wait more than they compute — the cluster's
# multi-member tests in process (without -race: several members in one
# process race inside protoactor-go, cluster/README.md) and across
# processes, the fleet page in Chromium and the Helm build; then the chart,
# the static binary and a short fuzzing run of each target.
test: vet fmt-check
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)
	$(MAKE) --no-print-directory -j4 --output-sync=target test-members test-cluster test-ui helm
	$(MAKE) --no-print-directory test-chart check-static fuzz-smoke

# The multi-member tests in process, without -race (above): every test in a
# file marked `//go:build !race`, found in the tree (so none is left out),
# and only those (the rest of their packages ran in the race run).
NORACE_FILES = $(shell grep -rl --include='*_test.go' --exclude-dir=bin --exclude-dir=deploy '^//go:build !race' .)
NORACE_PKGS  = $(sort $(patsubst %/,%,$(dir $(NORACE_FILES))))
NORACE_TESTS = $(shell grep -ho '^func Test[A-Za-z0-9_]*' $(NORACE_FILES) | sed 's/^func //' | paste -sd'|' -)
.PHONY: test-members
test-members:
	$(GO) test -count=1 -parallel $(MEMBER_PARALLEL) -run '^($(NORACE_TESTS))$$' $(NORACE_PKGS)

# The fuzz targets, as package:function.
FUZZ_TARGETS := messages/wire:FuzzDecode actors/normalizer:FuzzNormalize actors/zmtpguard:FuzzGuard \
	messages/routerevent:FuzzDecode actors/frontend/httpapi:FuzzRequestBody \
	actors/frontend/httpapi:FuzzReadDump actors/frontend/httpapi:FuzzFastDecode \
	messages/tokenizer:FuzzScannerMatchesRegex actors/frontend/picker:FuzzStream \
	actors/frontend/usage:FuzzCachedTokens bench/simengine:FuzzTraceDriver
FUZZ_BIN := $(CURDIR)/bin/fuzz
MODULE := github.com/kvrouter/kvrouter

# A short fuzzing run of each target ($(FUZZTIME) executions) through a
# test binary per package linked from the race run's compiled packages:
# the race detector on, and no coverage guidance, because the go command's
# coverage-guided fuzzing compiles every package again, instrumented.
# Crashers land in the package's testdata/fuzz as with `go test -fuzz`.
fuzz-smoke:
	@rm -rf $(FUZZ_BIN) && mkdir -p $(FUZZ_BIN)
	@set -e; gocache=$$($(GO) env GOCACHE); for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; bin=$(FUZZ_BIN)/$$(echo $$pkg | tr / -).test; \
		echo "fuzz-smoke: $$pkg $$fn, $(FUZZTIME), -race, without coverage guidance"; \
		[ -x $$bin ] || CGO_ENABLED=1 $(GO) test -race -c -o $$bin ./$$pkg; \
		(cd $$pkg && $$bin -test.run '^$$' -test.fuzz "^$$fn\$$" -test.fuzztime $(FUZZTIME) \
			-test.fuzzcachedir $$gocache/fuzz/$(MODULE)/$$pkg); done

# Coverage-guided fuzzing of each target, for longer runs
# (make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz: $$pkg $$fn, $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg; done

# The quick mode of `kvrouter-bench` (Mooncake traces over simulated engines
# through the real pipeline and /route: ingest, route latency sweep, memory,
# routing quality; under two minutes), the quick pinned load (kvrouter serve
# on one core, engines and an open-loop generator on the other, beside a
# net/http floor; under a minute; the full table is `kvrouter-bench
# pinned`), the quick pinned ingest (kvrouter serve on one core, replay
# publishers of pre-encoded KV events on the other; ~10 s; the full table
# is `kvrouter-bench pinned-ingest`), then the Go micro-benchmarks. Figures
# and method: bench/README.md.
bench: build
	./bin/kvrouter-bench --quick
	./bin/kvrouter-bench pinned --quick
	./bin/kvrouter-bench pinned-ingest --quick
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./bench/... ./messages/blockhash/

clean:
	rm -rf bin

# Regenerates the cluster's protobuf code (committed: a normal build needs
# no generator; versions in cluster/README.md). Installs protoc from
# Debian's protobuf-compiler when missing (needs root) and protoc-gen-go at
# the pinned version into bin/tools.
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTO_TOOLS := $(CURDIR)/bin/tools
.PHONY: generate
generate:
	@command -v protoc >/dev/null || { apt-get update && apt-get install -y protobuf-compiler; }
	GOBIN=$(PROTO_TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	PATH="$(PROTO_TOOLS):$$PATH" protoc -I. --go_out=. --go_opt=paths=source_relative cluster/clusterpb/kvrouter.proto

# Multi-process cluster tests: a real etcd (Debian's etcd-server;
# .ci/run installs it), `kvrouter serve --cluster` processes built from the
# repository, a host killed with SIGKILL, a host joining (~30 s).
.PHONY: test-cluster
test-cluster:
	@command -v etcd >/dev/null || { apt-get update -qq && apt-get install -y -qq etcd-server; }
	KVROUTER_CLUSTER_E2E=1 $(GO) test -count=1 -run '^(TestClusterHost(Loss|Joins)|TestClusterHostsMutualTLS)$$' ./cmd/kvrouter/

# The fleet page (GET /ui) in a real browser: Debian's headless Chromium
# (.ci/run installs it) driven over the DevTools protocol loads the page of
# a router fed by simulated engines (~10 s). ui-screenshot refreshes the
# screenshot the docs show.
UI_TEST := -tags browser -count=1 -run '^TestFleetPage' ./actors/frontend/fleetui/
.PHONY: test-ui ui-screenshot
test-ui:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	$(GO) test $(UI_TEST)
ui-screenshot:
	KVROUTER_UI_SCREENSHOT=$(CURDIR)/actors/frontend/fleetui/fleet-page.png $(GO) test -tags browser -count=1 -run '^TestFleetPageInChromium$$' ./actors/frontend/fleetui/

# The Helm chart (deploy/helm/kvrouter): helm lint and helm template with
# the default values and ci/clustered-values.yaml, a rendering that must
# fail (several hosts without a cluster), ci/monitoring-values.yaml (the
# dashboards' ConfigMaps, the PrometheusRule), then the rendered manifests
# checked by a Go test (deploy/charttest, a module of its own: ports,
# probes, RBAC verbs, security context, the monitoring objects equal to
# the files). Helm is built from the Go module
# proxy into bin/tools once (about 5.5 CPU-minutes: ~3 min on an idle
# 2-core machine); nothing is installed outside the repository.
HELM_VERSION ?= v3.22.0
HELM := $(PROTO_TOOLS)/helm-$(HELM_VERSION)
CHART := deploy/helm/kvrouter
CHART_OUT := $(CURDIR)/bin/chart
$(HELM):
	mkdir -p $(PROTO_TOOLS)/helm-build
	GOBIN=$(PROTO_TOOLS)/helm-build nice $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(PROTO_TOOLS)/helm-build/helm $@

# Helm alone (built at a lower priority while make test's waiting steps run).
.PHONY: helm
helm: $(HELM)

.PHONY: test-chart
test-chart: $(HELM)
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/clustered-values.yaml
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/picker-tls-values.yaml
	rm -rf $(CHART_OUT) && mkdir -p $(CHART_OUT)
	$(HELM) template kv $(CHART) --namespace kv > $(CHART_OUT)/default.yaml
	$(HELM) template kv $(CHART) --namespace kv -f $(CHART)/ci/clustered-values.yaml > $(CHART_OUT)/clustered.yaml
	$(HELM) template kv $(CHART) --namespace kv -f $(CHART)/ci/picker-tls-values.yaml > $(CHART_OUT)/picker-tls.yaml
	$(HELM) template kv $(CHART) --namespace kv --set picker.tls.enabled=false,picker.grpcHealth=false,picker.istioDestinationRule.enabled=true > $(CHART_OUT)/picker-plaintext.yaml
	@if $(HELM) template kv $(CHART) --set replicaCount=2 >/dev/null 2>&1; then \
		echo "test-chart: replicaCount=2 without cluster.enabled rendered; it must fail"; exit 1; fi
	@if $(HELM) template kv $(CHART) --set discovery.watchInferenceObjectives=true >/dev/null 2>&1; then \
		echo "test-chart: watchInferenceObjectives without an inferencePool rendered; it must fail"; exit 1; fi
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/monitoring-values.yaml
	$(HELM) template kv $(CHART) --namespace kv -f $(CHART)/ci/monitoring-values.yaml > $(CHART_OUT)/monitoring.yaml
	$(HELM) template kv $(CHART) --namespace kv --set dashboards.enabled=true,dashboards.label=kvrouter_dashboard,dashboards.labelValue=yes,dashboards.namespace=monitoring > $(CHART_OUT)/monitoring-custom.yaml
	cd deploy/charttest && KVROUTER_CHART_RENDERED=$(CHART_OUT) $(GO) test -count=1 ./...

# The container image's binary (deploy/Dockerfile builds it with
# CGO_ENABLED=0 too; its -trimpath and -ldflags change no linking, and
# would compile every package once more here): static (file, ldd), every base image of the Dockerfile pinned (an exact
# version tag or a digest; scratch needs none), and every file its build
# stage copies from the repository present. No container engine runs here,
# so the image itself is not built.
.PHONY: check-static
check-static:
	CGO_ENABLED=0 $(GO) build -o bin/kvrouter-static ./cmd/kvrouter
	@file bin/kvrouter-static | grep -q 'statically linked' || { file bin/kvrouter-static; echo "check-static: not statically linked"; exit 1; }
	@if ldd bin/kvrouter-static >/dev/null 2>&1; then ldd bin/kvrouter-static; echo "check-static: ldd finds dynamic libraries"; exit 1; fi
	@awk '$$1 == "FROM" {print $$2}' deploy/Dockerfile | while read -r img; do \
		case "$$img" in scratch|*@sha256:*|*:[0-9]*) ;; *) echo "check-static: base image $$img is not pinned"; exit 1;; esac; done
	@awk '$$1 == "COPY" && $$2 !~ /^--from=/ {for (i = 2; i < NF; i++) if ($$i !~ /^--/) print $$i}' deploy/Dockerfile | while read -r src; do \
		[ -e "$$src" ] || { echo "check-static: deploy/Dockerfile copies $$src, which the repository does not have"; exit 1; }; done
	@echo "check-static: bin/kvrouter-static is static; deploy/Dockerfile's bases are pinned and its sources present"
