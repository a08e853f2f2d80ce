# Two commands matter: `make demo` (the eru flow on the embedded store, no
# etcd needed) and `make test` (everything CI runs).
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 5s

.PHONY: build front demo test lint unit serve-suites conformance-serve conformance e2e chaos fuzz-short fuzz bench clean

# The plugins run once per call, so they are built for a short start:
# CGO_ENABLED=0 links them statically (with cgo, net makes them dynamic and
# every call first runs the dynamic loader: ~10% of a one-node call's CPU,
# BENCHMARKS.md), and urfave_cli_no_docs leaves out urfave/cli's markdown
# and man-page generator, which no command uses. The serve daemon is a
# binary of its own, $(BIN)/libexec/serve (docs/serve.md): `storage serve`
# execs it, and the plugins link none of its code (Prometheus, statsd, the
# watch cache), whose package initialisation every call would pay.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags urfave_cli_no_docs -ldflags '-s -w' -o $(BIN)/ ./cmd/storage ./cmd/compute
	CGO_ENABLED=0 $(GO) build -trimpath -tags urfave_cli_no_docs -ldflags '-s -w' -o $(BIN)/libexec/serve ./cmd/serve

# The small front binaries of docs/serve.md: $(BIN)/front/storage and
# compute forward each call to `storage serve` and exec the full binaries in
# $(BIN)/front/libexec/ when no daemon answers; the daemon's binary is there
# too. Install the folder's contents as the plugin folder.
front: build
	mkdir -p $(BIN)/front/libexec
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/front/storage ./cmd/forwarder
	cp $(BIN)/front/storage $(BIN)/front/compute
	cp $(BIN)/storage $(BIN)/compute $(BIN)/libexec/serve $(BIN)/front/libexec/

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

# The behaviour suites again, with a serve daemon started for every plugin
# folder and every call forwarded through it (answers must not change); the
# conformance suite (core's client and cobalt) the same way, through the
# front binary; then the concurrency suite with the daemon SIGKILLed at
# random moments and restarted.
serve-suites: conformance-serve
	ERU_TEST_SERVE=1 $(GO) test -count=1 ./cmd/storage/ ./cmd/compute/ ./tests/concurrency/
	ERU_TEST_SERVE=kill $(GO) test -count=1 ./tests/concurrency/

conformance-serve:
	cd conformance && ERU_TEST_SERVE=1 $(GO) test -count=1 .

# Every fuzz target for FUZZTIME on top of its committed corpus (which
# `unit` already replays). `make fuzz FUZZTIME=10m` fuzzes for longer.
# A failing target's output is shown (it names the input written under the
# package's testdata/fuzz/). Go's fuzzing engine can itself end a run with
# "context deadline exceeded" when -fuzztime runs out while its workers
# coordinate, writing no failing input (about one 5 s run in 10 to 20 on a
# busy 2-CPU machine; twice in a row happened in one `make test`): such a
# target is run again, up to four runs in all, and fails if the last one
# fails too. A found failure always writes its input and fails at once.
fuzz-short:
	@log=$$(mktemp) && trap 'rm -f "$$log"' EXIT && \
	for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    attempt=1; \
	    until $(GO) test $$pkg -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) >"$$log" 2>&1; do \
	      if grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log" && [ $$attempt -lt 4 ]; then \
	        attempt=$$((attempt + 1)); \
	        echo "fuzz $$pkg $$target: the fuzzing engine ran out of time coordinating (no failing input); attempt $$attempt of 4"; \
	      else \
	        cat "$$log"; echo "fuzz $$pkg $$target failed"; exit 1; \
	      fi; \
	    done; \
	  done; \
	done

fuzz: fuzz-short

# Each stage in turn, with a progress line as it starts and ends.
TEST_STAGES ?= lint unit serve-suites conformance e2e fuzz-short
test:
	@t0=$$(date +%s); \
	for stage in $(TEST_STAGES); do \
	  s=$$(date +%s); echo "== make test: $$stage: started"; \
	  if ! $(MAKE) --no-print-directory $$stage; then \
	    echo "== make test: $$stage: FAILED after $$(( $$(date +%s) - s ))s"; exit 1; \
	  fi; \
	  now=$$(date +%s); echo "== make test: $$stage: ok in $$(( now - s ))s ($$(( now - t0 ))s so far)"; \
	done

# The long chaos run of RELIABILITY.md: a 3-process etcd cluster with its
# leader killed and stopped, 50,000 writes checked one by one (make test runs
# a shorter one).
chaos:
	CHAOS_WRITES=50000 CHAOS_SECONDS=1800 $(GO) test ./tests/chaos/ -run Chaos -v -count=1 -timeout 45m

# Go benchmarks of the scheduler, the verbs and the serve daemon's cache and
# scrape, then whole processes (with and without `storage serve`) against
# an etcd the harness starts itself (etcdctl is built from the module proxy
# once). See BENCHMARKS.md.
BENCHRUNS ?= 15
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./storage/ ./overcommit/ ./cmd/... ./engine/ ./serve/...
	$(GO) run ./tools/bench -bin $(BIN) -runs $(BENCHRUNS)
	$(GO) test -count=1 ./tests/serve -run TestAnElephantCannotStarveAMouse -isolation-full -v

clean:
	rm -rf $(BIN)
