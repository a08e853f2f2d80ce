# Two commands matter: `make demo` (the eru flow on the embedded store, no
# etcd needed) and `make test` (everything CI runs).
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 5s

.PHONY: build demo test lint unit conformance e2e fuzz-short fuzz bench clean

build:
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/ ./cmd/storage ./cmd/compute

demo: build
	$(GO) run ./tools/demo -bin $(BIN)

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd conformance && $(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# core's own plugin client and resource manager against the binaries, on an
# etcd started inside the test process.
conformance:
	cd conformance && $(GO) test -count=1 $$($(GO) list ./... | grep -v '/e2e$$')

# The real eru core server (built once per core version and cached) with the
# binaries in its plugin folder, driven through its gRPC API.
e2e:
	cd conformance && $(GO) test -count=1 -timeout 30m ./e2e/

# Every fuzz target for FUZZTIME on top of its committed corpus (which
# `unit` already replays). `make fuzz FUZZTIME=10m` fuzzes for longer.
# A failing target's output is shown (it names the input written under the
# package's testdata/fuzz/).
fuzz-short:
	@log=$$(mktemp) && trap 'rm -f "$$log"' EXIT && \
	for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    if ! $(GO) test $$pkg -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) >"$$log" 2>&1; then \
	      cat "$$log"; echo "fuzz $$pkg $$target failed"; exit 1; \
	    fi; \
	  done; \
	done

fuzz: fuzz-short

# Each stage in turn, with a progress line as it starts and ends.
TEST_STAGES ?= lint unit conformance e2e fuzz-short
test:
	@t0=$$(date +%s); \
	for stage in $(TEST_STAGES); do \
	  s=$$(date +%s); echo "== make test: $$stage: started"; \
	  if ! $(MAKE) --no-print-directory $$stage; then \
	    echo "== make test: $$stage: FAILED after $$(( $$(date +%s) - s ))s"; exit 1; \
	  fi; \
	  now=$$(date +%s); echo "== make test: $$stage: ok in $$(( now - s ))s ($$(( now - t0 ))s so far)"; \
	done

# Go benchmarks of the scheduler and the verbs, then whole processes against
# a real etcd (needs Debian's etcd-server and etcd-client). See BENCHMARKS.md.
BENCHRUNS ?= 15
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./storage/ ./overcommit/ ./cmd/... ./engine/
	$(GO) run ./tools/bench -bin $(BIN) -runs $(BENCHRUNS)

clean:
	rm -rf $(BIN)
