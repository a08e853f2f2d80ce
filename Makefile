# Two commands matter: `make demo` (the eru flow on the embedded store, no
# etcd needed) and `make test` (everything CI runs).
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 5s

.PHONY: build front demo test lint unit conformance fuzz-short fuzz bench clean

build:
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/ ./cmd/storage ./cmd/compute

# The small front binaries of docs/serve.md: $(BIN)/front/storage and
# compute forward each call to `storage serve` and exec the full binaries in
# $(BIN)/front/libexec/ when no daemon answers. Install the folder's contents
# as the plugin folder.
front: build
	mkdir -p $(BIN)/front/libexec
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/front/storage ./cmd/forwarder
	cp $(BIN)/front/storage $(BIN)/front/compute
	cp $(BIN)/storage $(BIN)/compute $(BIN)/front/libexec/

demo: build
	$(GO) run ./tools/demo -bin $(BIN)

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd conformance && $(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

conformance:
	cd conformance && $(GO) test -count=1 ./...

# Every fuzz target for FUZZTIME on top of its committed corpus (which
# `unit` already replays). `make fuzz FUZZTIME=10m` fuzzes for longer.
fuzz-short:
	@for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) >/dev/null || exit 1; \
	  done; \
	done

fuzz: fuzz-short

test: lint unit conformance fuzz-short

# Go benchmarks of the scheduler and the verbs, then whole processes against
# a real etcd (needs Debian's etcd-server and etcd-client). See BENCHMARKS.md.
BENCHRUNS ?= 15
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./storage/ ./overcommit/ ./cmd/... ./engine/
	$(GO) run ./tools/bench -bin $(BIN) -runs $(BENCHRUNS)

clean:
	rm -rf $(BIN)
