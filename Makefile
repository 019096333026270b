# kvrouter — see README.md. Every target installs or builds what it needs.
GO        ?= go
FUZZTIME  ?= 10s
# Packages whose tests run with the race detector (everything, while the
# suite is small enough for 2 cores).
RACE_PKGS ?= ./...

.PHONY: all build run test vet fmt-check fuzz-smoke bench clean

all: build

build:
	$(GO) build -o bin/kvrouter ./cmd/kvrouter

# The main job, until the router's API lands: the ingest pipeline against 4
# built-in simulated engines driven by the Mooncake conversation trace; it
# ends by checking that the index equals every engine's cache. The decoder's
# sample payloads: ./bin/kvrouter decode --samples.
run: build
	./bin/kvrouter tap --sim 4 --requests 6000 --rate 1500

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Unit tests (with -race), the fuzz seed corpora (they run as ordinary
# tests), then a short fuzzing run of each target.
test: vet fmt-check
	$(GO) test -race -count=1 $(RACE_PKGS)
	$(MAKE) fuzz-smoke

fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./messages/wire
	$(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) ./actors/normalizer
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./messages/routerevent

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./bench/... ./messages/blockhash/

clean:
	rm -rf bin
