#!/usr/bin/env bash
# run.sh model-checks zklock's lease deadline (model/lease.pml), the
# mutex's grant handoff (model/handoff.pml, issue 37; its runs are named
# handoff*) and the semaphore's holder registry (model/registry.pml, issue
# 37, designed and not built yet; its runs are named registry*) with
# spin: the real protocol must show no error in any state,
# and each known-broken variant must show a counterexample, whose story is
# printed. It exits non-zero otherwise. It installs nothing:
# scripts/setup.sh installs spin.
#
#   model/run.sh            the runs below but the long one (make model)
#   model/run.sh real       only the runs whose name contains "real"
#   model/run.sh handoff    only the handoff model's runs
#   model/run.sh registry   only the registry model's runs
#   MODEL_FULL=1 model/run.sh   also real-2faults: two faults per run, about
#                           23 million states, 3 GB and a minute or more
#
# Build outputs (pan.c, pan, trails) go to a temporary directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
only=${1:-}

for tool in spin gcc; do
	command -v "$tool" >/dev/null || {
		echo "model: $tool not found (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name | expect (safe or broken) | spin defines | what it is | search
# (a safe run searches depth first; a broken one breadth first, unless it
# says dfs: breadth first would take too much memory)
runs=(
	"real|safe||the protocol as the code implements it, one fault per run"
	"real-2faults|safe|-DMAXFAULTS=2 -DFAULTEND=24 -DHORIZON=96 -DGPHASES=1 -DLPHASES=6|two faults per run, in the first T (MODEL_FULL=1)"
	# A counterexample needs one phase of the leader's pings and buckets, not
	# all: these runs try one, which keeps their searches short.
	"no-deadline|broken|-DNO_DEADLINE -DGPHASES=1 -DLPHASES=1|(a) the lease ends only on connection events"
	"from-reply|broken|-DFROM_REPLY -DMAXFAULTS=2 -DGPHASES=1 -DLPHASES=1|(b) the deadline counted from the reply, not the send"
	"sync|broken|-DSYNC_CONFIRMS -DGPHASES=1 -DLPHASES=1|(c) a sync accepted as a confirmation"
	# These need the buckets' phase that puts an expiry exactly at w + T - drift."
	"margin-0|broken|-DMARGIN=0|the deadline keeps no margin, the servers' clocks run T/20 fast"
	"drift|broken|-DDRIFT=2|the servers' clocks run faster than the margin allows (2 units > T/20)"
	# Outside the design's assumption: a client packet takes up to T/12 to
	# reach its server, on top of the leader's ping's T/12.
	"client-delay|broken|-DCDELAY=2|client packets delayed by T/12 as well as the pings|dfs"
	# The grant handoff (model/handoff.pml): late notifications, read in any
	# order; every session may expire, every waiter give up, an operator
	# delete a waiter's node. The broken runs need fewer faults than that.
	"handoff|safe||the transient-grant handoff, 3 participants, every fault: one holder, no grant left, the queue drains"
	"handoff-4|safe|-DN=4 -DMAXEXP=0 -DMAXGIVEUP=1 -DMAXDEL=2|4 participants, a give-up and two operator deletes: dead waiters behind a predecessor"
	"handoff-watches|safe|-DWATCH_CHECK -DMAXDEL=0|no live session is left watching a g(*), with no operator deletes"
	"handoff-no-read|broken|-DNO_READ -DMAXEXP=0 -DMAXDEL=0|a waiter holds when its predecessor goes without a grant, no read"
	"handoff-no-own-check|broken|-DNO_OWN_CHECK -DMAXEXP=0 -DMAXGIVEUP=0|a waiter holds on a grant without looking at its own watch"
	"handoff-unchecked-fire|broken|-DUNCHECKED_FIRE -DN=4 -DMAXEXP=0 -DMAXGIVEUP=1 -DMAXDEL=1|the cleanup fire does not check the own node"
	"handoff-any-grant|broken|-DANY_GRANT -DMAXEXP=0 -DMAXGIVEUP=0|a waiter takes any grant it is told of, not its predecessor's"
	# Not a variant: a waiter whose node an operator deleted can be left
	# with an exists-watch on a g(X) that no one will create again.
	"handoff-watch-left|broken|-DWATCH_CHECK -DMAXEXP=0 -DMAXGIVEUP=0|finding: an operator's delete leaves a watch until the session ends"
	# The semaphore's holder registry (model/registry.pml): one size K,
	# late notifications read in any order, every fault; holders that keep
	# their leases for ever, and at the end no waiter waits while a lease
	# is free. The broken runs need fewer faults, some 4 participants.
	"registry|safe|-DN=3 -DMAXEXP=3 -DMAXGIVEUP=3 -DMAXDEL=2 -DMAXKEEP=2|3 participants, K=2, every fault: at most K holders, no entry left, no waiter asleep while a lease is free"
	"registry-4|safe|-DN=4 -DMAXEXP=0 -DMAXGIVEUP=1 -DMAXDEL=1|4 participants, K=2, a give-up, an operator's delete, a lease kept"
	"registry-early-reg|broken|-DN=3 -DEARLY_REG -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|a holder registers before every node ahead of it has"
	"registry-chain-on-del|broken|-DN=4 -DCHAIN_ON_DEL -DMAXEXP=0 -DMAXDEL=0 -DMAXKEEP=0|a waiter told X went reads the registry as if X had registered"
	"registry-no-own-check|broken|-DN=4 -DNO_OWN_CHECK -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=1 -DMAXKEEP=0|a chained waiter decides without looking at its own watch"
	"registry-any-made|broken|-DN=4 -DANY_MADE -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0 -DMAXKEEP=0|a waiter takes NodeCreated on any entry as its X's registration"
	"registry-unchecked-fire|broken|-DN=4 -DK=1 -DUNCHECKED_FIRE -DMAXEXP=0 -DMAXGIVEUP=1 -DMAXDEL=1 -DMAXKEEP=0|the fire of r(X) does not check the own node|dfs"
	"registry-no-holder-watch|broken|-DN=4 -DNO_HOLDER_WATCH -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|an unchained holder does not watch its X: a waiter sleeps while a lease is free"
	# The simpler build (AT_GRANT): register only at the grant, announce
	# as today otherwise; its broken run ignores an announce read with the
	# watch.
	"registry-at-grant|safe|-DN=3 -DAT_GRANT -DMAXEXP=3 -DMAXGIVEUP=3 -DMAXDEL=2 -DMAXKEEP=2|registration only at the grant, announces as today: 3 participants, every fault"
	"registry-at-grant-4|safe|-DN=4 -DAT_GRANT -DMAXEXP=0 -DMAXGIVEUP=1 -DMAXDEL=1|registration only at the grant: 4 participants, a give-up, a delete, a lease kept"
	"registry-reg-all|safe|-DN=3 -DREG_ALL -DMAXEXP=3 -DMAXGIVEUP=3 -DMAXDEL=2 -DMAXKEEP=2|every holder registers at its grant, unchained ones as u(me): 3 participants, every fault"
	"registry-reg-all-4|safe|-DN=4 -DREG_ALL -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|every holder registers at its grant: 4 participants, a lease kept (with a fault: docs/model.md, by hand)"
	"registry-reg-all-count-clean|broken|-DN=4 -DREG_ALL -DCOUNT_CLEAN -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|every holder registers; a chained waiter counts only the r entries"
	"registry-reg-all-unclean-as-clean|broken|-DN=4 -DREG_ALL -DUNCLEAN_AS_CLEAN -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|every holder registers, an unchained one as r(me)"
	"registry-reg-all-chain-by-pred|broken|-DN=4 -DREG_ALL -DCHAIN_BY_PRED -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=0|every holder registers; a read of the queue chains on its X's entry alone"
	"registry-at-grant-no-ann-read|broken|-DN=4 -DAT_GRANT -DNO_ANN_READ -DMAXEXP=0 -DMAXGIVEUP=0 -DMAXDEL=1|registration only at the grant, an announce made before the watch ignored"
)

failed=0
total_start=$SECONDS
for run in "${runs[@]}"; do
	IFS='|' read -r name expect defs what how <<<"$run"
	[[ -z $only || $name == *"$only"* ]] || continue
	[[ $name != real-2faults || -n ${MODEL_FULL:-} ]] || continue
	dir=$tmp/$name
	mkdir -p "$dir"
	model=lease.pml
	[[ $name != handoff* ]] || model=handoff.pml
	[[ $name != registry* ]] || model=registry.pml
	cp "$here/lease.pml" "$here/handoff.pml" "$here/registry.pml" "$here/params.h" "$dir/"
	start=$SECONDS
	# shellcheck disable=SC2086 # defs is a list of words
	(cd "$dir" && spin -a $defs "$model" >spin.out 2>&1) || {
		cat "$dir/spin.out" >&2
		echo "model: $name: spin -a failed" >&2
		failed=1
		continue
	}
	# SAFETY: assertions only. A safe run searches depth first, COLLAPSE
	# storing states in less memory; a broken one breadth first, so that
	# the counterexample it finds is the shortest, the easiest story.
	if [[ $expect == safe || $how == dfs ]]; then search=-DCOLLAPSE; else search=-DBFS; fi
	(cd "$dir" && gcc -O2 -DSAFETY -DNOREDUCE "$search" -o pan pan.c 2>gcc.out) || {
		cat "$dir/gcc.out" >&2
		echo "model: $name: gcc failed" >&2
		failed=1
		continue
	}
	(cd "$dir" && ./pan -m20000 >pan.out 2>&1) || true
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.out" | head -n1)
	states=$(awk '/states, stored/ {print $1}' "$dir/pan.out" | head -n1)
	secs=$((SECONDS - start))
	if [[ -z $errors ]]; then
		cat "$dir/pan.out" >&2
		echo "model: $name: pan gave no verdict" >&2
		failed=1
		continue
	fi
	if grep -q 'max search depth too small' "$dir/pan.out"; then
		echo "model: $name: the search was cut at its depth limit" >&2
		failed=1
		continue
	fi
	case $expect in
	safe)
		if [[ $errors == 0 ]]; then
			printf 'model: %-13s ok: %s states, 0 errors (%ds): %s\n' "$name" "$states" "$secs" "$what"
		else
			printf 'model: %-13s FAILED: %s error(s): %s\n' "$name" "$errors" "$what" >&2
			failed=1
		fi
		;;
	broken)
		if [[ $errors != 0 && -f $dir/$model.trail ]]; then
			printf 'model: %-13s ok: spin found the counterexample (%s states, %ds): %s\n' "$name" "$states" "$secs" "$what"
		else
			printf 'model: %-13s FAILED: no counterexample for a broken variant: %s\n' "$name" "$what" >&2
			failed=1
			continue
		fi
		;;
	esac
	if [[ $errors != 0 && -f $dir/$model.trail ]]; then
		# The model's printf's tell the story (lease.pml's lines start
		# t=, handoff.pml's h: , registry.pml's r: ); spin -t replays the
		# trail.
		# The start (the phases), then the end.
		# shellcheck disable=SC2086
		(cd "$dir" && spin -t $defs "$model") | sed -n -e 's/^ *\(t=.*\)$/    \1/p' -e 's/^ *h: \(.*\)$/    \1/p' -e 's/^ *r: \(.*\)$/    \1/p' >"$dir/story"
		head -n1 "$dir/story"
		if (($(wc -l <"$dir/story") > 31)); then
			echo "    ..."
		fi
		tail -n +2 "$dir/story" | tail -n 30
	fi
done
echo "model: done in $((SECONDS - total_start))s"
exit "$failed"
