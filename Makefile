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

build:
	$(GO) build -o bin/modelcalls ./cmd/modelcalls

# Measure what the gateway costs on the hot path, against baselines in the same run, and write
# BENCHMARKS.md (ISSUE 5; a few minutes). BENCH_FLAGS=-quick for a smoke run, see go run ./bench -h.
.PHONY: bench
bench:
	$(GO) run ./bench $(BENCH_FLAGS)
