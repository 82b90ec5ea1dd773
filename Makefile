# make test: what CI runs (.ci/run) and what the README tells contributors.
# make demo: the examples against a throwaway ZooKeeper.
# Both run scripts/setup.sh first: it installs what is missing, starts Docker
# and chooses the ZooKeeper image (saved in .zklock-image).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

# The image comes from the environment if set, else from what setup chose.
# Ryuk, testcontainers' reaper, cannot be pulled offline; zktest terminates
# its containers itself.
ZK_ENV = ZKLOCK_ZK_IMAGE="$${ZKLOCK_ZK_IMAGE:-$$(cat .zklock-image)}" \
	TESTCONTAINERS_RYUK_DISABLED="$${TESTCONTAINERS_RYUK_DISABLED:-true}"

.PHONY: setup test vet fmt-check demo

setup:
	scripts/setup.sh

# The chaos suite runs on its own with -v, so its line of figures (faults by
# kind, acquisitions, overlaps, orphans, leaked watches, longest recovery)
# shows in CI's output; everything else runs first.
test: setup vet fmt-check
	$(ZK_ENV) $(GO) test -race -count=1 -timeout 15m -skip '^TestChaos$$' ./...
	set -o pipefail; $(ZK_ENV) $(GO) test -race -count=1 -timeout 10m -run '^TestChaos$$' -v . \
		| grep -vE '^[[:space:]]*(=== (RUN|PAUSE|CONT|NAME)|--- PASS)'

vet:
	$(GO) vet ./...

fmt-check:
	@unformatted=$$(gofmt -l .); \
	if [[ -n $$unformatted ]]; then \
		echo "gofmt -w needed on:" >&2; echo "$$unformatted" >&2; exit 1; \
	fi

demo: setup
	$(ZK_ENV) $(GO) run ./tools/zkrun -- sh -c 'go run ./examples/mutex && go run ./examples/rwlock && go run ./examples/semaphore && go run ./examples/driver && go run ./examples/sessionexpiry'
