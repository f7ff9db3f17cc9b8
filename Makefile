# The commands README.md names. Each installs what it needs itself.
GO ?= go

.PHONY: demo test vet build

# Run the main job on the embedded demo (no network, no model server needed).
demo:
	$(GO) run ./cmd/modelcalls demo

# Vet and run every test with the race detector.
test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/

# Build and vet every package, tests and the e2e tag included, for each supported platform: linux,
# darwin and windows on amd64 and arm64 (docs/capture-store.md, "Platforms"). Reuses the build cache;
# a cold cache compiles the dependencies once per platform.
CROSS_OS ?= linux darwin windows
CROSS_ARCH ?= amd64 arm64
.PHONY: cross
cross:
	@set -e; for os in $(CROSS_OS); do for arch in $(CROSS_ARCH); do \
		echo "== $$os/$$arch"; \
		GOOS=$$os GOARCH=$$arch $(GO) build ./...; \
		GOOS=$$os GOARCH=$$arch $(GO) vet ./...; \
		GOOS=$$os GOARCH=$$arch $(GO) vet -tags e2e ./test/e2e/; \
	done; done

build:
	$(GO) build -o bin/modelcalls ./cmd/modelcalls

# Measure what the gateway costs on the hot path, against baselines in the same run, and write
# BENCHMARKS.md (a few minutes). BENCH_FLAGS=-quick for a smoke run; BENCH_FLAGS="-io-uring=off
# -out BENCHMARKS-uring-off.md" for the same rows with io_uring off; see go run ./test/bench -h.
.PHONY: bench
bench:
	$(GO) run ./test/bench $(BENCH_FLAGS)

.PHONY: e2e e2e-ci e2e-otel e2e-jaeger

# End to end: every agent harness (Claude Code, Codex, opencode, pi, Qwen Code; pinned, installed
# from npm into ~/.cache/modelcalls-e2e) through `modelcalls proxy`, against a scripted tool-loop
# upstream and a real llama-server built from source (cached), then merge; see docs/e2e.md.
e2e:
	scripts/e2e.sh

# The CI subset: pi on all three dialects through the proxy against the scripted upstream, plain
# and gzip-compressed (about 25 s with an empty cache: npm installs pi).
e2e-ci:
	MODELCALLS_E2E_HARNESSES=pi MODELCALLS_E2E_UPSTREAMS=scripted,scripted-gzip scripts/e2e.sh

# OpenTelemetry export end to end: a real Collector (built from test/e2e/otelcol, its own Go module, cached
# in ~/.cache/modelcalls-e2e; ~9 min on a cold module cache, ~2 min warm) receives the spans of real
# proxies over OTLP/HTTP and gRPC and of `export otlp`; then the Collector is down. See docs/otel.md.
e2e-otel:
	scripts/e2e-otel.sh

# The traces-only backend people run: Jaeger v2 (built from its Go modules, test/e2e/jaeger, cached in
# ~/.cache/modelcalls-e2e) takes the spans of `export otlp` (HTTP and gRPC) and of a live proxy, refuses
# their metrics (a warning, not a failure), and its query API gives each rollout back as one trace.
e2e-jaeger:
	scripts/e2e-jaeger.sh
