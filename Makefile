# make test: what CI runs (.ci/run) and what the README tells contributors.
# make test-server ZK=3.9: the server tests again, on another ZooKeeper (CI
# runs it after make test).
# make demo: the examples against a throwaway ZooKeeper.
# make zookeeper PORT=2181 [ZK=3.9]: a ZooKeeper on 127.0.0.1:PORT until Ctrl-C.
# make stop-docker: stops the dockerd that scripts/setup.sh started.
# All but the last run scripts/setup.sh first: it installs what is missing,
# starts Docker and chooses the ZooKeeper image (saved in .zklock-image);
# docs/zookeeper-versions.md says which versions are tested and how to pick.
#
# The repository holds several Go modules (see docs/contributing.md,
# "Repository layout"), tied together by go.work: from the root, ./... means the library
# module only, and $(MODULE)/... every package of every module.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

MODULE := github.com/zkrecipes/zklock
# The directories of the modules go.work uses, the library's first.
MODULES := . zktest tests tools examples zklockotel
# Every module but the library's, as package patterns.
OTHERS := $(MODULE)/zktest/... $(MODULE)/tests/... $(MODULE)/tools/... $(MODULE)/examples/... $(MODULE)/zklockotel/...

# The oldest Go the library's go.mod admits, which the library must build
# and vet with (the go command downloads it through the module proxy).
OLDEST_GO := go1.21.13
# staticcheck 2026.2.2, the first release line that knows Go 1.26.
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The image comes from the environment if set, else from what setup chose.
# Ryuk, testcontainers' reaper, cannot be pulled offline; zktest terminates
# its containers itself.
ZK_ENV = ZKLOCK_ZK_IMAGE="$${ZKLOCK_ZK_IMAGE:-$$(cat .zklock-image)}" \
	TESTCONTAINERS_RYUK_DISABLED="$${TESTCONTAINERS_RYUK_DISABLED:-true}"

.PHONY: setup setup-test test test-server check docs-check vet vet-oldest fmt-check mod-check staticcheck demo zookeeper stop-docker model fuzz mutate mutate-server

setup:
	scripts/setup.sh

# The library's tests need only a ZooKeeper: zkrun starts one and hands its
# address over in ZKLOCK_TEST_SERVERS (or passes on the one already there).
# The other modules' tests start their containers through zktest. The chaos
# suite runs on its own with -v, so its figures (faults by kind, acquisitions,
# overlaps, over-K, orphans, leaked watches, longest recovery; then a line per
# recipe) show in CI's output; everything else runs first.
test: setup check model fuzz
	$(ZK_ENV) $(GO) run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- \
		$(GO) test -race -count=1 -timeout 10m ./...
	$(ZK_ENV) $(GO) test -race -count=1 -timeout 15m -skip '^TestChaos$$' $(OTHERS)
	set -o pipefail; $(ZK_ENV) $(GO) test -race -count=1 -timeout 10m -run '^TestChaos$$' -v ./tests \
		| grep -vE '^[[:space:]]*(=== (RUN|PAUSE|CONT|NAME)|--- PASS)'

# The server tests whose outcome depends on the server, on the ZooKeeper that
# ZK names: 3.8 or 3.9 (the offline images zklock-zookeeper:3.8 and :3.9, built
# from Debian 12's and 13's packages) or an image name. They are the root
# package's tests, the interop suite, the session-swap test and the chaos suite (which freezes an
# ensemble's server past syncLimit on 3.9.3 and later only: tests/chaos_test.go,
# chaosEnsemblePause). make test runs them, and everything else, on the image
# setup chose; CI then runs make test-server ZK=3.9 (4 minutes more here).
ZK ?=
SERVER_ENV = ZKLOCK_ZK_IMAGE="$$image" TESTCONTAINERS_RYUK_DISABLED="$${TESTCONTAINERS_RYUK_DISABLED:-true}"

test-server:
	@test -n "$(ZK)" || { echo "usage: make test-server ZK=3.9 (3.8, 3.9 or an image name)" >&2; exit 2; }
	set -eo pipefail; image=$$(scripts/setup.sh image '$(ZK)'); \
	echo "=== server tests on $$image: root package, interop, session swap, chaos ==="; \
	$(SERVER_ENV) $(GO) run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- \
		$(GO) test -race -count=1 -timeout 10m .; \
	$(SERVER_ENV) $(GO) test -race -count=1 -timeout 10m -run '^(TestInterop|TestSessionReplacedOnReconnect$$)' ./tests; \
	$(SERVER_ENV) $(GO) test -race -count=1 -timeout 10m -run '^TestChaos$$' -v ./tests \
		| grep -vE '^[[:space:]]*(=== (RUN|PAUSE|CONT|NAME)|--- PASS)'

# The spin model of the lease deadline (model/, docs/model.md): the real
# protocol must hold in every state, each known-broken variant must fail.
# Setup installs spin.
model:
	model/run.sh

# The fuzz targets of hostile input (children names, lock paths, semaphore
# sizes, the wire's reader of ZooKeeper frames), each for FUZZTIME, one
# after the other: go test runs one -fuzz target at a time. Their seed
# corpora, and every input that once failed, are in the packages'
# testdata/fuzz and run with the ordinary tests too. scripts/fuzz.sh runs a
# target once more on Go 1.26's spurious deadline report (golang/go#75804).
FUZZTIME ?= 15s
FUZZ_TARGETS := FuzzSortChildren:. FuzzValidatePath:. FuzzSemaphoreSize:. FuzzWireReader:./internal/session

fuzz:
	@GO=$(GO) scripts/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

# Everything that needs no ZooKeeper.
check: mod-check vet vet-oldest fmt-check staticcheck docs-check setup-test

# What scripts/setup.sh stops (make stop-docker) and reports at the end of a
# demo, against a stand-in dockerd of its own: this machine's engine is left alone.
setup-test:
	scripts/setup_test.sh

# Every relative link and anchor in the Markdown resolves, every `make X` a page
# gives names a target of this Makefile, and every Go block
# a page marks as a copy of a source declaration matches it (tools/docscheck).
docs-check:
	$(GO) run ./tools/docscheck

vet:
	$(GO) vet $(MODULE)/...

vet-oldest:
	GOTOOLCHAIN=$(OLDEST_GO) GOWORK=off $(GO) vet ./...

fmt-check:
	@unformatted=$$(gofmt -l .); \
	if [[ -n $$unformatted ]]; then \
		echo "gofmt -w needed on:" >&2; echo "$$unformatted" >&2; exit 1; \
	fi

# Each module's go.mod and go.sum are complete and tidy on their own, without
# go.work: what a user of the module gets.
mod-check:
	@for m in $(MODULES); do \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m" >&2; exit 1; }; \
	done

staticcheck:
	$(STATICCHECK) $(MODULE)/...

# The demo needs only Docker and an image (setup's demo mode installs no JDK,
# peers or model checker). It ends, pass or fail, with how long it took and
# what it left running.
DEMO := go run ./examples/mutex && go run ./examples/rwlock && go run ./examples/semaphore && go run ./examples/driver && go run ./examples/sessionexpiry && go run ./examples/election && go run ./examples/otelprometheus && examples/zklock-cli.sh

demo:
	@t0=$$(date +%s); rc=0; \
	{ scripts/setup.sh demo >/dev/null && $(ZK_ENV) $(GO) run ./tools/zkrun -- sh -c '$(DEMO)'; } || rc=$$?; \
	if [ $$rc = 0 ]; then outcome=done; else outcome="failed (exit $$rc)"; fi; \
	echo "demo: $$outcome after $$(($$(date +%s) - t0))s" >&2; \
	scripts/setup.sh running; exit $$rc

# A ZooKeeper for development on 127.0.0.1:PORT (default 2181), in the
# foreground until Ctrl-C, which stops and removes its container and data:
# make zookeeper PORT=2181, ZK=3.8 or 3.9 (or an image name) to choose the
# server, else the image make test uses. Its zoo.cfg is the image's own
# (tickTime=2000: sessions of 4s to 40s), with the four-letter words on and no
# limit on connections per client.
PORT ?= 2181

zookeeper:
	@set -e; \
	if [ -n "$(ZK)" ]; then image=$$(scripts/setup.sh image '$(ZK)'); else image=$$(scripts/setup.sh demo); fi; \
	echo "zookeeper: $$image on 127.0.0.1:$(PORT) until Ctrl-C (check: echo srvr | nc 127.0.0.1 $(PORT))" >&2; \
	exec docker run --rm --init --name "zklock-zookeeper-$(PORT)" -p "127.0.0.1:$(PORT):2181" \
		-e ZOO_4LW_COMMANDS_WHITELIST='*' -e ZOO_MAX_CLIENT_CNXNS=0 "$$image"

# Stops the dockerd that scripts/setup.sh started, by the pid in its pid file,
# and says what it did; an engine started otherwise is left alone.
stop-docker:
	@scripts/setup.sh stop-docker

# Mutation testing of the decision code (tools/mutate, docs/contributing-tests.md,
# "Mutation testing"): MUTATE_N mutants drawn with MUTATE_SEED, each run
# against the tests that need no ZooKeeper; not part of make test (it takes
# about half an hour). mutate-server runs that sample's survivors against the
# root package's server-backed tests (MUTATE_RUN narrows them, as -run).
MUTATE_SEED ?= 30
MUTATE_N ?= 150
MUTATE_WORKERS ?= 1
MUTATE_FLAGS ?=
MUTATE_RUN ?=

mutate:
	$(GO) run ./tools/mutate -seed $(MUTATE_SEED) -n $(MUTATE_N) -workers $(MUTATE_WORKERS) $(MUTATE_FLAGS)

mutate-server: setup
	$(ZK_ENV) $(GO) run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- \
		$(GO) run ./tools/mutate -seed $(MUTATE_SEED) -workers $(MUTATE_WORKERS) -run '$(MUTATE_RUN)' $(MUTATE_FLAGS) \
		-survivors "$${TMPDIR:-/tmp}/zklock-mutate-$(MUTATE_SEED).json"

# make pin-library: the repository's modules other than the library require
# it (and each other: zktest, zklockotel) at the pseudo-version of one commit
# of this repository, so that `go get github.com/zkrecipes/zklock/zktest@main`
# works alone; their replace directives still resolve everything here, so
# builds stay offline. This moves those require lines to PIN_COMMIT (default
# HEAD): run it on main, where HEAD is a commit that exists upstream, and
# commit the result; the commit named is then the one before the commit that
# records it (docs/contributing.md, "Pinning the library").
PIN_COMMIT ?= HEAD
PINNED_BY := zktest:zklock zklockotel:zklock,zktest tests:zklock,zktest tools:zklock,zktest examples:zklock,zktest,zklockotel

.PHONY: pin-library
pin-library:
	@set -e; \
	hash=$$(git rev-parse --verify '$(PIN_COMMIT)^{commit}'); \
	when=$$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd "$$hash"); \
	version=v0.0.0-$$when-$${hash:0:12}; \
	for entry in $(PINNED_BY); do \
		dir=$${entry%%:*}; args=; \
		for dep in $$(echo "$${entry#*:}" | tr , ' '); do \
			if [[ $$dep == zklock ]]; then path=$(MODULE); else path=$(MODULE)/$$dep; fi; \
			args="$$args -require=$$path@$$version"; \
		done; \
		(cd $$dir && $(GO) mod edit $$args); \
	done; \
	echo "the modules require the library at $$version ($$(git log -1 --format='%h %s' "$$hash"))"
