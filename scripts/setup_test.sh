#!/usr/bin/env bash
# setup_test.sh checks what scripts/setup.sh stops and reports, without
# touching this machine's Docker engine: its pid file is pointed at a stand-in
# (a copy of sleep named dockerd) that this test starts and owns.
#
#   scripts/setup_test.sh    # make check runs it
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

tmp=$(mktemp -d)
others=()
cleanup() {
	local pid
	# Only ours: a pid already stopped may have been reused since.
	for pid in ${others[@]+"${others[@]}"}; do
		case $(cat "/proc/$pid/comm" 2>/dev/null) in
		dockerd | not-dockerd) kill "$pid" 2>/dev/null || true ;;
		esac
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

export ZKLOCK_DOCKERD_PIDFILE=$tmp/dockerd.pid ZKLOCK_DOCKER_SERVICE_MARK=$tmp/service
fails=0
check() { # check NAME CONDITION...
	local name=$1
	shift
	if "$@"; then
		echo "ok   $name"
	else
		echo "FAIL $name" >&2
		fails=$((fails + 1))
	fi
}
setup() { scripts/setup.sh "$@" 2>&1; }
alive() { [[ -e /proc/$1 && $(cut -d' ' -f3 "/proc/$1/stat") != Z ]]; }
# start NAME: a process named NAME that lives until killed; prints its pid.
start() {
	cp "$(command -v sleep)" "$tmp/$1"
	setsid "$tmp/$1" 600 </dev/null >/dev/null 2>&1 &
	echo $!
}

out=$(setup stop-docker)
check "no pid file: nothing stopped" grep -q "no dockerd started by scripts/setup.sh" <<<"$out"

fake=$(start dockerd)
others+=("$fake")
echo "$fake" >"$ZKLOCK_DOCKERD_PIDFILE"
out=$(setup running)
check "running names the dockerd it started" grep -q "left running: dockerd (pid $fake" <<<"$out"
check "running says how to stop it" grep -q "make stop-docker" <<<"$out"
out=$(setup stop-docker)
check "stop-docker says what it stopped" grep -q "dockerd (pid $fake) stopped" <<<"$out"
for _ in $(seq 1 50); do alive "$fake" || break; sleep 0.1; done
check "stop-docker stopped it" bash -c "! { [[ -e /proc/$fake ]] && [[ \$(cut -d' ' -f3 /proc/$fake/stat) != Z ]]; }"
check "stop-docker removed the pid file" test ! -e "$ZKLOCK_DOCKERD_PIDFILE"

# A pid file naming a process that is not a dockerd (a reused pid): left alone.
other=$(start not-dockerd)
others+=("$other")
echo "$other" >"$ZKLOCK_DOCKERD_PIDFILE"
out=$(setup stop-docker)
check "a pid that is no dockerd: nothing stopped" grep -q "is not running; nothing stopped" <<<"$out"
check "a pid that is no dockerd: still alive" alive "$other"
out=$(setup running)
check "running with no dockerd of ours" grep -q "nothing started by scripts/setup.sh" <<<"$out"

out=$(scripts/setup.sh no-such-mode 2>&1) && rc=0 || rc=$?
check "an unknown mode fails" test "$rc" -ne 0
check "an unknown mode is named" grep -q "unknown mode no-such-mode" <<<"$out"
out=$(scripts/setup.sh image 2>&1) && rc=0 || rc=$?
check "image without a version fails with its usage" bash -c "[[ $rc -ne 0 ]] && grep -q 'usage: .* image VERSION' <<<\"\$0\"" "$out"

if ((fails > 0)); then
	echo "setup_test: $fails check(s) failed" >&2
	exit 1
fi
echo "setup_test: all checks passed"
