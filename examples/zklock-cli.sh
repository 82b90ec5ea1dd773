#!/usr/bin/env bash
# The zklock command against the ZooKeeper in ZKLOCK_SERVERS (make demo
# starts one): two jobs take turns under one lock, each told its fencing
# token, while ls shows who holds and who waits; then an election.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ZKLOCK_SERVERS:?set ZKLOCK_SERVERS=host:port}"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/zklock" ./cmd/zklock
zklock=$bin/zklock
path=/zklock-examples/cli-$$

# Job 1 holds until job 2 has queued behind it; ls shows both.
"$zklock" lock -data job-1 "$path" -- sh -c '
	echo "job 1 holds $ZKLOCK_NODE (token $ZKLOCK_TOKEN)"
	while [ ! -e "$0/queued" ]; do sleep 0.05; done' "$bin" &
first=$!
until "$zklock" ls -json "$path" | grep -q job-1; do sleep 0.05; done
"$zklock" lock -data job-2 "$path" -- sh -c 'echo "job 2 holds $ZKLOCK_NODE (token $ZKLOCK_TOKEN)"' &
second=$!
until "$zklock" ls -json "$path" | grep -q job-2; do sleep 0.05; done
"$zklock" ls "$path"
touch "$bin/queued"
wait "$first" "$second"

# An election: the command runs only while this process leads.
"$zklock" elect -data replica-1 "$path-leader" -- sh -c 'echo "replica 1 leads (token $ZKLOCK_TOKEN)"'
"$zklock" lock -try "$path" -- true && echo "the lock is free again"
