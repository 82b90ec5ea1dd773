/*
 * A semaphore handoff whose cost does not grow with the queue: the holders'
 * registry (issue 37; docs/design.md, "Why a semaphore's waiters still read
 * the queue"). Not built yet: the code is to be built to this model, in
 * its REG_ALL form (below), and a change to the design is made here first
 * (`model/run.sh registry`).
 * docs/model.md ("The registry model") maps it to the design and to
 * ZooKeeper.
 *
 * N participants (one session each, one node each, one size K) join one
 * queue once: each creates an ephemeral-sequential lease node (sequence
 * numbers only grow) and reads the children with a children watch (the
 * first look): it holds if fewer than K nodes are ahead of it. Beside the
 * queue, a plain child `_holders` holds the registry: r(s), an ephemeral
 * entry per registered holder, named after its node s.
 *
 *   register          a holder registers only once it knows that every
 *                     live node ahead of it is registered ("chain"): its
 *                     read listed nothing ahead, or it saw r(X) exist, X
 *                     its immediate predecessor (told NodeCreated(r(X)), or
 *                     its exists(r(X)) answered yes). It registers with one
 *                     multi [check its node, create r(me)], and only if a
 *                     node may wait behind it (its read listed one, or its
 *                     children watch fired); else it need not.
 *   release           registered: one multi [delete its node, delete r(me)].
 *                     Not: a plain delete, firing its exists-watch on r(X)
 *                     if it may be armed (below).
 *   chained waiter    reads the registry (getChildren `_holders`, with a
 *                     watch; its own watch quiet): every live node ahead of
 *                     it is there, so it holds iff fewer than K entries are
 *                     ahead of it; else it waits for the registry's
 *                     children to change and reads it again. No read of the
 *                     queue.
 *   unchained waiter  watches exists(r(X)) and getData(X), X its immediate
 *                     predecessor (the first waiting one, with K nodes
 *                     ahead, getData on every one of them, as today) and
 *                     its own node. Told NodeCreated(r(X)) (or exists says
 *                     yes): chained. Told a node it watches is deleted, with
 *                     no r(X) before: reads the queue again, and if X went
 *                     fires its exists-watch on r(X): one multi [check its
 *                     node, create r(X), delete r(X)].
 *   give-up           unchained: one multi [create r(X), delete own node,
 *                     delete r(X)] (firing its watch); chained: a delete.
 *
 * Why it is safe (never more than K holders). Claim: once r(X) has existed,
 * every node that was ahead of X then and is still live is registered. By
 * induction over registrations: X registered only when chained, so every
 * live node ahead of X was registered (or it listed none ahead); nodes never
 * join ahead of X (the leader names a sequential node after its parent's
 * cversion); an entry goes only with its node (one multi; a session's
 * ephemerals all go in one closeSession transaction), and an entry is made
 * only with its node there (the check). A fired r(X) is seen by no live
 * waiter but the firer (the handoff model's argument: a live V with X its
 * predecessor would have the firer's node between X and V, or V between X
 * and the firer, on one of their reads) and is never listed (a multi is one
 * transaction). So a chained waiter's read of the registry lists every live
 * node ahead of it: its count is exact.
 *
 * Faults, at any step: up to MAXEXP sessions expire (node and entry go at
 * one zxid; a hold ends first, by the lease deadline); up to MAXGIVEUP
 * waiters give up; an operator deletes up to MAXDEL waiters' nodes.
 * Notifications go to mailboxes at the write (zxid order) and are read
 * late, in any order, as a select over channels does; a deletion of X
 * counts as "no entry" only if NodeCreated(r(X)) has not arrived by then.
 *
 * Safety: at most K holders (asserted at every decision). No entry or node
 * is left once everyone has finished. Progress: up to MAXKEEP holders keep
 * their leases for ever; when nothing can move any more (timeout), a
 * participant still waiting is asserted to wait for K held leases, and
 * one blocked anywhere else is an invalid end state that spin reports.
 *
 * Broken variants (-D), which must be refuted:
 *   EARLY_REG     a holder registers as soon as it holds, unchained
 *   ANY_MADE      a waiter takes NodeCreated on any entry as chained, not
 *                 only on its X's (its own fire's, say)
 *   UNCHECKED_FIRE the fire has no check of the own node
 *   NO_HOLDER_WATCH an unchained holder does not watch its X: it never
 *                 learns the chain, and the waiter behind it sleeps while a
 *                 lease is free (the check at the end)
 * A different protocol, not a broken variant:
 *   AT_GRANT      a holder registers only at its grant (chained, a node
 *                 behind), else announces as today's semaphore does (a
 *                 version bump, when it waited or a node is behind); an
 *                 unchained waiter told of an announce, or whose getData
 *                 reads a version bumped before its watch, reads the queue
 *   NO_ANN_READ   (with AT_GRANT) the bump read with the watch is ignored:
 *                 a waiter that watched after the announce sleeps while a
 *                 lease is free
 *   REG_ALL       (implies AT_GRANT) every holder that waited or has a
 *                 node behind registers at its grant, in the multi of its
 *                 announce: chained, as r(me) (which its successor's
 *                 exists-watch hears); unchained, as u(me), which counts
 *                 in the registry but chains nobody. A read of the queue
 *                 comes after a read of the registry, and chains its
 *                 reader if every node it lists ahead was listed there.
 *                 No holder watches anything after its grant.
 *   COUNT_CLEAN   (broken, with REG_ALL) a chained waiter counts only the r
 *                 entries ahead, not the u ones
 *   UNCLEAN_AS_CLEAN (broken, with REG_ALL) an unchained holder registers as
 *                 r(me), as a chained one does
 *   CHAIN_BY_PRED (broken, with REG_ALL) a read of the queue chains its reader if
 *                 its X alone was in the registry read before it
 *   CHAIN_ON_DEL  a waiter told X is deleted reads the registry, not the
 *                 queue, as if X had registered
 *   NO_OWN_CHECK  a chained waiter decides without looking at its own
 *                 watch (its node may be gone)
 */

#ifdef REG_ALL
#define AT_GRANT
#define QREADY (node[me[i]] && snapped)
#else
#define QREADY node[me[i]]
#endif

#ifndef N
#define N 4
#endif
#ifndef K
#define K 2
#endif
#ifndef MAXEXP
#define MAXEXP 1
#endif
#ifndef MAXGIVEUP
#define MAXGIVEUP 1
#endif
#ifndef MAXDEL
#define MAXDEL 1
#endif
/* Holders that never release (up to K): the run then ends with waiters
 * that must wait, and the check at the end is that they must. */
#ifndef MAXKEEP
#define MAXKEEP 1
#endif

#if N != 3 && N != 4
#error "registry.pml: N must be 3 or 4"
#endif

#define BIT(s) (1 << (s))
#define DEL   1 /* NodeDeleted on node s */
#define MADE  2 /* NodeCreated on r(s) */
#define KIDS  3 /* NodeChildrenChanged on `_holders` */
#define JOIN  4 /* NodeChildrenChanged on the lock path */
#define ANN   5 /* NodeDataChanged on node s: its announce (AT_GRANT) */

/* The server, by sequence number 1..N; node s is P(s-1)'s. */
byte nseq;
bool node[N + 1];
bool reg[N + 1];   /* r(s), the registry entry of node s */
bool ureg[N + 1];  /* u(s): node s registered unchained (REG_ALL) */
bool ann[N + 1];   /* node s's version was bumped: its announce (AT_GRANT) */
byte wn[N + 1];    /* participants (bits) getData-watching node s */
byte wr[N + 1];    /* participants (bits) exists-watching r(s) */
byte wk;           /* participants (bits) watching `_holders`' children */
byte wc;           /* participants (bits) watching the lock path's children */

/* Participants, by index 0..N-1. */
byte me[N];
byte cur[N];       /* X: its immediate predecessor at its last read */
byte watching[N];  /* nodes (bits) whose deletion it waits for */
byte rmail[N];     /* NodeCreated(r(s)) arrived, s its X (bits) */
byte dmail[N];     /* NodeDeleted(s) of a node it watches arrived (bits) */
bool kmail[N];     /* the registry changed */
bool omail[N];     /* its own node's deletion arrived, or getData found it gone */
bool amail[N];     /* a node it waits on announced its hold (AT_GRANT) */
byte aseen[N];     /* announces it was told of or read (bits): the code's w.seen */
bool behind[N];    /* a node may be behind it: its read listed one, or its children watch fired */
bool expired[N];
bool holding[N];
bool fin[N];
byte nholders;
byte nexp, ngiveup, ndel, nkeep;

inline notify(w, kind, s) {
	j = 0;
	do
	:: j < N ->
		if
		:: (w & BIT(j)) && !expired[j] && !fin[j] ->
			if
			:: kind == DEL && s == me[j] -> omail[j] = true
			:: kind == DEL && s != me[j] && (watching[j] & BIT(s)) -> dmail[j] = dmail[j] | BIT(s)
			:: kind == ANN && s != me[j] && (watching[j] & BIT(s)) -> amail[j] = true; aseen[j] = aseen[j] | BIT(s)
#ifdef ANY_MADE
			:: kind == MADE -> rmail[j] = rmail[j] | BIT(cur[j])
#else
			:: kind == MADE && s == cur[j] -> rmail[j] = rmail[j] | BIT(s)
#endif
			:: kind == KIDS -> kmail[j] = true
			:: kind == JOIN -> behind[j] = true
			:: else -> skip
			fi
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	w = 0
}

inline delnode(s) {
	node[s] = false;
	notify(wn[s], DEL, s)
}

inline decide() {
	holding[i] = true;
	nholders++;
	printf("r: P%d holds (node %d)\n", i, me[i]);
	if
	:: nholders > K -> printf("r: VIOLATION: %d holders at once, K = %d\n", nholders, K)
	:: else -> skip
	fi;
	assert(nholders <= K)
}

/* The fire: one multi [check(own node), create r(dirty), delete r(dirty)]:
 * its exists-watchers are told NodeCreated, the registry's children
 * watchers a change; no read ever lists it. */
inline fire() {
#ifndef UNCHECKED_FIRE
	if
	:: !node[me[i]] -> printf("r: P%d fires r(%d): fails, its node is gone\n", i, dirty)
	:: else ->
#endif
		printf("r: P%d fires r(%d): create and delete it in one multi\n", i, dirty);
		notify(wr[dirty], MADE, dirty);
		notify(wk, KIDS, 0)
#ifndef UNCHECKED_FIRE
	fi;
#endif
	dirty = 0
}

/* One multi [check(own node), create r(me)]; with REG_ALL, [create r(me),
 * set its node's data] (the set is the check, and the announce). */
inline register() {
	if
	:: node[me[i]] ->
		reg[me[i]] = true;
		registered = true;
		printf("r: P%d registers r(%d)\n", i, me[i]);
		notify(wr[me[i]], MADE, me[i]);
#ifdef REG_ALL
		ann[me[i]] = true;
		notify(wn[me[i]], ANN, me[i]);
#endif
		notify(wk, KIDS, 0)
	:: else -> printf("r: P%d registers: fails, its node is gone\n", i)
	fi
}

/* REG_ALL: one multi [create u(me), set its node's data]: it counts in the
 * registry, and announces, but tells no exists-watcher of r(me). */
inline uregister() {
	if
	:: node[me[i]] ->
		ureg[me[i]] = true;
		registered = true;
		ann[me[i]] = true;
		printf("r: P%d registers unchained: u(%d), and announces\n", i, me[i]);
		notify(wn[me[i]], ANN, me[i]);
		notify(wk, KIDS, 0)
	:: else -> printf("r: P%d registers unchained: fails, its node is gone\n", i)
	fi
}

inline expire() {
	expired[i] = true;
	printf("r: FAULT: P%d's session expires\n", i);
	if
	:: holding[i] -> holding[i] = false; nholders--; printf("r:   P%d's hold ends (its lease deadline)\n", i)
	:: else -> skip
	fi;
	s = 1;
	do
	:: s <= N ->
		wn[s] = wn[s] & ~BIT(i);
		wr[s] = wr[s] & ~BIT(i);
		s++
	:: else -> break
	od;
	wk = wk & ~BIT(i);
	wc = wc & ~BIT(i);
	/* closeSession: node and entry at one zxid */
	if
	:: node[me[i]] -> node[me[i]] = false; reg[me[i]] = false; ureg[me[i]] = false; notify(wn[me[i]], DEL, me[i]); notify(wk, KIDS, 0)
	:: else -> skip
	fi
}

/* The read of the queue: nodes live ahead, X the last of them. */
inline readqueue() {
	known = 0;
	cur[i] = 0;
	n = 0;
	s = 1;
	do
	:: s < me[i] -> if
		:: node[s] -> known = known | BIT(s); cur[i] = s; n++
		:: else -> skip
		fi;
		s++
	:: s > me[i] && s <= N -> if
		:: node[s] -> behind[i] = true
		:: else -> skip
		fi;
		s++
	:: s == me[i] -> s++
	:: s > N -> break
	od;
	wc = wc | BIT(i);
	rmail[i] = 0;
	dmail[i] = 0;
	amail[i] = false;
	chain = (n == 0)
#ifdef REG_ALL
	/* or every node listed ahead was in the registry read before */
	;
#ifdef CHAIN_BY_PRED
	chain = chain || ((rsnap & BIT(cur[i])) != 0);
#else
	chain = chain || ((known & rsnap) == known);
#endif
	rsnap = 0;
	snapped = false
#endif
}

/* REG_ALL: the read of the registry that comes before a read of the
 * queue: which nodes had an entry (r or u). */
inline snapregistry() {
	rsnap = 0;
	s = 1;
	do
	:: s <= N -> if
		:: reg[s] || ureg[s] -> rsnap = rsnap | BIT(s)
		:: else -> skip
		fi;
		s++
	:: else -> break
	od;
	printf("r: P%d reads the registry, before the queue\n", i);
	snapped = true
}

/* The read of the registry: entries ahead of the own node. */
inline readregistry() {
	n = 0;
	s = 1;
	do
	:: s < me[i] -> if
#if defined(REG_ALL) && !defined(COUNT_CLEAN)
		:: reg[s] || ureg[s] -> n++
#else
		:: reg[s] -> n++
#endif
		:: else -> skip
		fi;
		s++
	:: else -> break
	od;
	wk = wk | BIT(i)
}

proctype Participant(byte i) {
	byte s, j, n, known, dirty, done;
	bool quitter, doomed, chain, registered, keep, waited;
	byte pend;  /* AT_GRANT: 1 register, 2 announce, 3 register unchained (REG_ALL), still to send */
	byte rsnap; /* REG_ALL: the nodes with an entry at the registry's read */
	bool snapped;

	atomic {
		nseq == i ->  /* symmetry: Pi creates node i+1 */
		if
		:: ngiveup < MAXGIVEUP -> ngiveup++; quitter = true
		:: true -> skip
		fi;
		if
		:: nexp < MAXEXP -> nexp++; doomed = true
		:: true -> skip
		fi;
		nseq++;
		me[i] = nseq;
		node[nseq] = true;
		printf("r: P%d creates node %d\n", i, nseq);
		notify(wc, JOIN, nseq)
	}
queue:
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { dirty != 0 -> fire() }
	:: atomic {
		!node[me[i]] -> printf("r: P%d reads the queue: its node is gone (ends)\n", i); goto gone
	   }
#ifdef REG_ALL
	:: atomic { !snapped -> snapregistry() }
#endif
	:: atomic {
		QREADY ->
		readqueue();
		if
		:: n < K -> printf("r: P%d reads the queue: %d ahead, holds\n", i, n); decide(); goto hold
		:: else ->
			/* the first waiting one watches every node ahead (today's
			 * semaphore); a later one, X alone */
			if
			:: n == K -> watching[i] = known
			:: else -> watching[i] = BIT(cur[i])
			fi;
			printf("r: P%d reads the queue: %d ahead, waits on X = %d\n", i, n, cur[i]);
			done = 0;
			goto watch
		fi
	   }
	od;
watch:
	/* exists(r(X)) and getData on the watched nodes and its own, in any
	 * order; a pending fire goes before them. */
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { dirty != 0 -> fire() }
	:: atomic {
		dirty == 0 && !(done & 1) ->
		done = done | 1;
		if
		:: reg[cur[i]] -> printf("r: P%d exists r(%d): yes, chained\n", i, cur[i]); chain = true
		:: else -> printf("r: P%d exists r(%d), watch: no\n", i, cur[i]); wr[cur[i]] = wr[cur[i]] | BIT(i)
		fi;
		if
		:: done == 3 -> goto end_unchained
		:: else -> skip
		fi
	   }
	:: atomic {
		dirty == 0 && !(done & 2) ->
		done = done | 2;
		s = 1;
		do
		:: s <= N ->
			if
			:: (watching[i] & BIT(s)) && node[s] ->
				wn[s] = wn[s] | BIT(i);
				if
#ifndef NO_ANN_READ
				:: ann[s] && !(aseen[i] & BIT(s)) ->
					/* announced before the watch: the version read says so */
					amail[i] = true;
					aseen[i] = aseen[i] | BIT(s)
#endif
				:: else -> skip
				fi
			:: (watching[i] & BIT(s)) && !node[s] -> dmail[i] = dmail[i] | BIT(s)
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		if
		:: node[me[i]] -> wn[me[i]] = wn[me[i]] | BIT(i)
		:: else -> omail[i] = true
		fi;
		printf("r: P%d getData on the nodes it waits on and its own\n", i);
		if
		:: done == 3 -> goto end_unchained
		:: else -> skip
		fi
	   }
	od;
end_unchained:
#ifdef AT_GRANT
	waited = true;
#endif
end_unchained_loop:
	do
	:: chain -> goto registry
	:: atomic { doomed -> expire(); goto gone }
	:: atomic {
		(rmail[i] & BIT(cur[i])) ->
		printf("r: P%d told r(%d) created: chained\n", i, cur[i]);
		chain = true;
		watching[i] = 0;
		goto registry
	   }
	:: atomic {
		dmail[i] != 0 && !(rmail[i] & BIT(cur[i])) ->
#ifdef CHAIN_ON_DEL
		if
		:: (dmail[i] & BIT(cur[i])) ->
			printf("r: P%d told %d deleted: takes it as chained\n", i, cur[i]);
			chain = true;
			watching[i] = 0;
			goto registry
		:: else -> skip
		fi;
#endif
		printf("r: P%d told a node it waits on went, no r(%d): reads the queue\n", i, cur[i]);
		if
		:: !node[cur[i]] -> dirty = cur[i]
		:: else -> skip
		fi;
		watching[i] = 0;
		goto queue
	   }
#ifdef AT_GRANT
	:: atomic {
		amail[i] && !(rmail[i] & BIT(cur[i])) ->
		printf("r: P%d told a node it waits on announced, no r(%d): reads the queue\n", i, cur[i]);
		if
		:: !node[cur[i]] -> dirty = cur[i]
		:: else -> skip
		fi;
		watching[i] = 0;
		goto queue
	   }
#endif
	:: atomic {
		omail[i] -> printf("r: P%d told its node %d deleted (ends)\n", i, me[i]); goto gone
	   }
	:: atomic {
		quitter ->
		if
		:: node[me[i]] && !reg[cur[i]] ->
			printf("r: P%d gives up: one multi, create r(%d), delete node %d, delete r(%d)\n", i, cur[i], me[i], cur[i]);
			notify(wr[cur[i]], MADE, cur[i]);
			notify(wk, KIDS, 0);
			delnode(me[i])
		:: node[me[i]] && reg[cur[i]] ->
			/* the multi fails (r(X) exists: its watch fired); a delete */
			printf("r: P%d gives up: deletes node %d\n", i, me[i]);
			delnode(me[i])
		:: else -> printf("r: P%d gives up: its node is gone\n", i)
		fi;
		goto gone
	   }
	od;
registry:
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic {
		true ->
#ifndef NO_OWN_CHECK
		if
		:: omail[i] || !node[me[i]] -> printf("r: P%d: its node is gone (ends)\n", i); goto gone
		:: else -> skip
		fi;
#endif
		kmail[i] = false;
		readregistry();
		if
		:: n < K -> printf("r: P%d reads the registry: %d ahead, holds\n", i, n); decide(); goto hold
		:: else -> printf("r: P%d reads the registry: %d ahead, waits\n", i, n); goto end_chained
		fi
	   }
	od;
end_chained:
#ifdef AT_GRANT
	waited = true;
#endif
end_chained_loop:
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { kmail[i] -> goto registry }
	:: atomic { omail[i] -> printf("r: P%d told its node %d deleted (ends)\n", i, me[i]); goto gone }
	:: atomic {
		quitter ->
		printf("r: P%d gives up: deletes node %d\n", i, me[i]);
		if
		:: node[me[i]] -> delnode(me[i])
		:: else -> skip
		fi;
		goto gone
	   }
	od;
hold:
	/* Unchained holders learn the chain as waiters do; a holder registers
	 * once chained, if a node may be behind it. One that keeps its lease
	 * still does all that, and never releases. */
	atomic {
		done = 0;
		if
		:: nkeep < MAXKEEP && !doomed -> nkeep++; keep = true
		:: true -> skip
		fi;
#ifdef REG_ALL
		/* at the grant, if it waited or a node is behind: register, as
		 * r(me) if chained, else as u(me); the announce is in it */
		if
		:: (waited || behind[i]) && chain -> pend = 1
#ifdef UNCLEAN_AS_CLEAN
		:: (waited || behind[i]) && !chain -> pend = 1
#else
		:: (waited || behind[i]) && !chain -> pend = 3
#endif
		:: else -> skip
		fi
#elif defined(AT_GRANT)
		/* at the grant: register if chained and a node is behind; else
		 * announce (a version bump) if it waited or a node is behind */
		if
		:: chain && behind[i] -> pend = 1
		:: else ->
			if
			:: waited || behind[i] -> pend = 2
			:: else -> skip
			fi
		fi
#endif
	}
end_hold:
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { dirty != 0 -> fire() }
#ifdef EARLY_REG
	:: atomic { dirty == 0 && !registered && behind[i] -> register() }
#elif defined(AT_GRANT)
	:: atomic { dirty == 0 && pend == 1 -> pend = 0; register() }
	:: atomic { dirty == 0 && pend == 3 -> pend = 0; uregister() }
	:: atomic {
		dirty == 0 && pend == 2 ->
		pend = 0;
		printf("r: P%d announces: bumps node %d\n", i, me[i]);
		ann[me[i]] = true;
		notify(wn[me[i]], ANN, me[i])
	   }
#else
	:: atomic { dirty == 0 && !registered && behind[i] && chain -> register() }
#endif
#if !defined(NO_HOLDER_WATCH) && !defined(AT_GRANT)
	:: atomic {
		dirty == 0 && !chain && !(done & 1) ->
		done = done | 1;
		watching[i] = BIT(cur[i]);
		if
		:: reg[cur[i]] -> chain = true
		:: else -> wr[cur[i]] = wr[cur[i]] | BIT(i)
		fi;
		if
		:: node[cur[i]] -> wn[cur[i]] = wn[cur[i]] | BIT(i)
		:: else -> dmail[i] = dmail[i] | BIT(cur[i])
		fi
	   }
#endif
	:: atomic {
		!chain && (rmail[i] & BIT(cur[i])) -> chain = true; watching[i] = 0
	   }
	:: atomic {
		/* X went with no entry: the holder reads the queue again (it
		 * still holds: fewer ahead) and fires r(X). */
		dirty == 0 && !chain && (dmail[i] & BIT(cur[i])) && !(rmail[i] & BIT(cur[i])) ->
		dirty = cur[i];
		readqueue();
		watching[i] = 0;
		done = 0;
		printf("r: P%d (holding) told X went with no entry: reads the queue, %d ahead\n", i, n)
	   }
	:: atomic {
		dirty == 0 && pend == 0 && registered && !keep ->
		holding[i] = false;
		nholders--;
		printf("r: P%d releases: one multi, delete node %d, delete its entry\n", i, me[i]);
		node[me[i]] = false;
		reg[me[i]] = false;
		ureg[me[i]] = false;
		notify(wn[me[i]], DEL, me[i]);
		notify(wk, KIDS, 0);
		goto gone
	   }
	:: atomic {
		dirty == 0 && pend == 0 && !registered && !keep ->
		holding[i] = false;
		nholders--;
		if
		:: cur[i] != 0 && (wr[cur[i]] & BIT(i)) && !reg[cur[i]] ->
			/* its exists-watch on r(X) is armed: it set it, while
			 * waiting or holding, and has not been told of it (a
			 * fired watch leaves wr and sets rmail), which the code
			 * knows too: fire it */
			printf("r: P%d releases unregistered: one multi, create r(%d), delete node %d, delete r(%d)\n", i, cur[i], me[i], cur[i]);
			notify(wr[cur[i]], MADE, cur[i]);
			notify(wk, KIDS, 0)
		:: else -> printf("r: P%d releases unregistered: deletes node %d\n", i, me[i])
		fi;
		delnode(me[i]);
		goto gone
	   }
	od;
gone:
	atomic {
		fin[i] = true;
		rmail[i] = 0;
		dmail[i] = 0;
		kmail[i] = false;
		omail[i] = false;
		amail[i] = false;
		behind[i] = false;
		watching[i] = 0;
		s = 0;
		j = 0;
		n = 0;
		known = 0;
		done = 0;
		quitter = false;
		doomed = false;
		chain = false;
		registered = false;
		waited = false;
		pend = 0;
		rsnap = 0;
		snapped = false;
		aseen[i] = 0
	}
}

/* An operator deletes a node whose participant does not hold. */
inline opdelete(t) {
	ndel++;
	printf("r: FAULT: an operator deletes node %d (P%d's, not holding)\n", t, t - 1);
	node[t] = false;
	notify(wn[t], DEL, t)
}
#define DELETABLE(t) (ndel < MAXDEL && node[t] && !holding[t - 1])

proctype Deleter() {
	byte j;
end:	/* it may delete fewer, or none */
	do
	:: atomic { DELETABLE(1) -> opdelete(1) }
	:: atomic { DELETABLE(2) -> opdelete(2) }
	:: atomic { DELETABLE(3) -> opdelete(3) }
#if N > 3
	:: atomic { DELETABLE(4) -> opdelete(4) }
#endif
	od
}

/* At the end (nothing can move: everyone has finished, keeps its lease or
 * waits): a waiter waits only if K leases are held. Then, once everyone has
 * finished, no node and no entry is left. */
init {
	byte p = 0, s, waiting;
	atomic {
		do
		:: p < N -> run Participant(p); p++
		:: else -> break
		od;
		run Deleter()
	}
	timeout;
	p = 0;
	do
	:: p < N ->
		if
		:: !fin[p] && !holding[p] -> waiting++
		:: else -> skip
		fi;
		p++
	:: else -> break
	od;
	if
	:: waiting > 0 && nholders < K ->
		printf("r: STUCK: %d waiting, %d of %d leases held\n", waiting, nholders, K);
		assert(false)
	:: else -> skip
	fi;
	if
	:: nkeep > 0 -> skip  /* a lease kept: its node stays */
	:: else ->
		s = 1;
		do
		:: s <= N ->
			assert(!node[s]);
			if
			:: reg[s] || ureg[s] -> printf("r: ORPHAN: the entry of %d stays\n", s); assert(false)
			:: else -> skip
			fi;
			s++
		:: else -> break
		od
	fi
}
