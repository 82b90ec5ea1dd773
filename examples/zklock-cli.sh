#!/usr/bin/env bash
# The zklock command against the ZooKeeper in ZKLOCK_SERVERS, or
# 127.0.0.1:2181 when it is unset (make demo starts one): two jobs take
# turns under one lock, each told its fencing token, while ls shows who
# holds and who waits and observe prints every change of holder; then an
# election.
set -euo pipefail
cd "$(dirname "$0")/.."
export ZKLOCK_SERVERS=${ZKLOCK_SERVERS:-127.0.0.1:2181}
echo "using ZooKeeper at $ZKLOCK_SERVERS"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/zklock" ./cmd/zklock
zklock=$bin/zklock
path=/zklock-examples/cli-$$

# observe prints each change of the lock's holders, one line each, until
# it is interrupted (it exits 0 then).
"$zklock" observe "$path" > "$bin/observed" &
observer=$!

# Job 1 holds until job 2 has queued behind it; ls shows both.
"$zklock" lock -data job-1 "$path" -- sh -c '
	echo "job 1 holds $ZKLOCK_NODE (token $ZKLOCK_TOKEN)"
	while [ ! -e "$0/queued" ]; do sleep 0.05; done' "$bin" &
first=$!
# (ls exits 122, saying so on stderr, until the lock path exists.)
until "$zklock" ls -json "$path" 2>/dev/null | grep -q job-1; do sleep 0.05; done
"$zklock" lock -data job-2 "$path" -- sh -c 'echo "job 2 holds $ZKLOCK_NODE (token $ZKLOCK_TOKEN)"; sleep 0.5' &
second=$!
until "$zklock" ls -json "$path" | grep -q job-2; do sleep 0.05; done
"$zklock" ls "$path"
touch "$bin/queued"
wait "$first" "$second"
# Once observe has seen job 2 hold and then nobody (or after 10s: a holder
# that comes and goes between two of its reads can pass unseen), interrupt it.
for _ in $(seq 200); do
	grep -q job-2 "$bin/observed" && tail -n 1 "$bin/observed" | grep -q 'holders none' && break
	sleep 0.05
done
kill -INT "$observer" && wait "$observer"
echo "observe saw:"
sed 's/^/  /' "$bin/observed"

# An election: the command runs only while this process leads.
"$zklock" elect -data replica-1 "$path-leader" -- sh -c 'echo "replica 1 leads (token $ZKLOCK_TOKEN)"'
"$zklock" lock -try "$path" -- true && echo "the lock is free again"
