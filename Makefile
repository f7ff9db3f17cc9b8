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
