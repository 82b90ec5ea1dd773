#!/usr/bin/env bash
# fuzz.sh TIME TARGET:PKG...: runs each fuzz target for TIME, one after the
# other (go test runs one -fuzz target at a time), and fails on the first
# that fails.
#
# One failure is not the target's: Go 1.26's fuzzing coordinator can report
# "context deadline exceeded" as the -fuzztime deadline passes, with no
# failing input (golang/go#75804, fixed in Go 1.27; seen in our CI on
# FuzzSemaphoreSize). A real failure writes its input to testdata/fuzz and
# says so; that one, or any other, fails at once. The deadline report alone,
# with no input written, runs the target once more, and fails if it comes
# again.
set -uo pipefail
time=$1
shift
for t in "$@"; do
	name=${t%%:*} pkg=${t#*:}
	for try in 1 2; do
		out=$("${GO:-go}" test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		[ "$rc" -eq 0 ] && break
		if [ "$try" -eq 1 ] && grep -q '^    context deadline exceeded$' <<<"$out" &&
			! grep -q 'Failing input written to' <<<"$out"; then
			echo "fuzz.sh: $name: the fuzzing coordinator's deadline report, no failing input (golang/go#75804): once more"
			continue
		fi
		exit "$rc"
	done
done
