/*
 * zklock's mutex handoff by a transient grant (issue 37), the design the
 * code is built to. docs/model.md ("The handoff model") maps every
 * variable to the design and to ZooKeeper.
 *
 * N participants (one session each) join one queue once: each creates an
 * ephemeral-sequential node (sequence numbers only grow), reads the
 * children, holds if first. Else, with X its immediate predecessor, it
 * sets three watches, in any order, each before or after X changes:
 * getData(X), exists(g(X)) and getData(own node), the "own watch". g(X)
 * is the grant path named after X's sequence number; it never exists
 * outside a multi.
 *
 *   release by holder H   one multi: create g(H), delete H, delete g(H).
 *                         The exists-watchers of g(H) are told NodeCreated
 *                         (one-shot: consumed), then the getData-watchers of
 *                         H NodeDeleted; g(H) never persists. Or, as a
 *                         holder that takes no part in the handoff, a plain
 *                         delete of H.
 *   grant                 a waiter told NodeCreated(g(X)), X its current
 *                         predecessor, holds with no read, unless its own
 *                         watch has fired (a non-blocking look: that
 *                         notification has a lower zxid, so it is there
 *                         already); then it requeues (here: ends).
 *   slow path             told NodeDeleted(X) (or getData(X) found X gone)
 *                         with no grant on X before it: it reads the
 *                         children again, and cleans its exists-watch on
 *                         g(X), armed and never to fire by itself, with the
 *                         "fire": one multi [check(own node), create g(X),
 *                         delete g(X)], which fails whole if its node is
 *                         gone. The fire goes at any step from then until
 *                         the waiter's next request after the read (its
 *                         watches, its release): a session's requests are
 *                         processed in order.
 *   give-up               a waiter that gives up deletes its node with one
 *                         multi [create g(X), delete own, delete g(X)], which
 *                         fires its own exists-watch while its node still
 *                         exists; if its node is gone the multi fails and it
 *                         ends with no write.
 *
 * Notifications are put in the waiter's mailboxes (gmail: grants, dmail:
 * predecessor deleted, omail: own node deleted) when the write triggers
 * them, in zxid order, and read late, in any order (a select over the
 * watches' channels); a deletion of X counts as "no grant" only if no grant
 * on X has arrived by then.
 *
 * Faults, at any step: up to MAXEXP sessions expire (their node vanishes,
 * their watches vanish, their notifications stop; a hold ends first, by
 * the lease deadline); up to MAXGIVEUP waiters give up; a Deleter (an
 * operator) deletes up to MAXDEL nodes that are not first in the queue (a
 * waiter's: deleting the first node, the holder's, decided or not, is a
 * lease loss, which the lease model covers).
 *
 * Symmetry: the participants are alike, so Pi is the one that creates
 * node i+1 (the (i+1)-th to join, at any step after Pi-1 joined); the
 * other join orders are the same runs with the names swapped.
 *
 * Safety: never two holders (nholders <= 1, asserted at every decision).
 * Why: g(X) is created only (a) by X's holder, X first, deleted in the
 * same transaction, so only X's waiters are told, or (b) by a waiter W
 * whose own node exists in that transaction and that had X as its
 * immediate predecessor. In (b) no other waiter V with a live node can be
 * exists-watching g(X): V watched g(X) only with X its immediate
 * predecessor, and W's node sat between X and V from before V's read (or V
 * between X and W from before W's read), so V's node is gone, and V's own
 * watch, with a lower zxid, is there before the grant: only W (who ignores
 * it: X is no longer its predecessor) and such dead waiters (who refuse)
 * receive it. Asserted at each (b) grant too.
 * No grant is left: once everyone has finished no g(*) exists (asserted).
 * Progress: every participant ends (holds and releases, gives up, or
 * expires); a waiter blocked for ever is an invalid end state, which spin
 * reports. A waiter that will give up says so when it joins (quitter).
 *
 * Broken variants (-D), which must be refuted:
 *   NO_READ        a waiter holds when X is deleted with no grant, no read
 *   NO_OWN_CHECK   a waiter holds on NodeCreated(g(X)) without looking at
 *                  its own watch
 *   UNCHECKED_FIRE the fire has no check of the own node (needs N=4)
 *   ANY_GRANT      a waiter takes any grant it is told of, not only its
 *                  current predecessor's (its own fire's, say)
 * A finding, not a variant:
 *   WATCH_CHECK    asserts that once everyone has finished no live session
 *                  exists-watches a g(*); a waiter whose node an operator
 *                  deleted fails it (docs/model.md)
 */

#ifndef N
#define N 3
#endif
/* Faults per run: by default every one N allows (the operator can delete
 * only the N-1 nodes that are ever behind another). */
#ifndef MAXEXP
#define MAXEXP N
#endif
#ifndef MAXGIVEUP
#define MAXGIVEUP N
#endif
#ifndef MAXDEL
#define MAXDEL (N - 1)
#endif

/* Bit masks of sequence numbers 1..N and the choices below name each. */
#if N != 3 && N != 4
#error "handoff.pml: N must be 3 or 4"
#endif

#define BIT(i) (1 << (i))
#define GRANT 1 /* NodeCreated on g(s) */
#define DEL   2 /* NodeDeleted on node s */

/* The server, by sequence number 1..N (0: none); node s is P(s-1)'s. */
byte nseq;              /* the last sequence number given */
bool node[N + 1];       /* queue node s exists */
bool grant[N + 1];      /* g(s) exists: only inside a multi */
byte wg[N + 1];         /* participants (bits) exists-watching g(s) */
byte wn[N + 1];         /* participants (bits) getData-watching node s */

/* Participants, by index 0..N-1. */
byte me[N];             /* its node */
byte cur[N];            /* X: its immediate predecessor at its watches */
byte gmail[N];          /* NodeCreated(g(s)) arrived (bits of s) */
byte dmail[N];          /* NodeDeleted(s) of its predecessor arrived, or getData found it gone */
bool omail[N];          /* its own node's deletion arrived, or getData found it gone */
bool expired[N];
bool holding[N];
bool fin[N];
byte nholders;
byte nexp, ngiveup, ndel;  /* faults planned (expiries, give-ups), done (deletes) */

/* A write triggers watches w (one-shot: consumed) on s: each notification
 * goes to its session's mailbox, unless the session expired or finished.
 * Only notifications about a participant's current X or its own node are
 * kept: the code drops the channels of watches it no longer waits on. */
inline notify(w, kind, s) {
	j = 0;
	do
	:: j < N ->
		if
		:: (w & BIT(j)) && !expired[j] && !fin[j] ->
			if
			:: kind == DEL && s == me[j] -> omail[j] = true
			:: kind == DEL && s != me[j] && s == cur[j] -> dmail[j] = dmail[j] | BIT(s)
#ifdef ANY_GRANT
			:: kind == GRANT -> gmail[j] = gmail[j] | BIT(s)
#else
			:: kind == GRANT && s == cur[j] -> gmail[j] = gmail[j] | BIT(s)
#endif
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

/* Create g(s) within a multi of who's; the caller deletes it in the same
 * multi. In case (b), a waiter's multi, no one else with a live node may be
 * exists-watching g(s). */
inline mkgrant(s, who, waiters) {
	grant[s] = true;
#ifndef UNCHECKED_FIRE
	if
	:: waiters ->
		j = 0;
		do
		:: j < N ->
			if
			:: j != who && (wg[s] & BIT(j)) && !expired[j] && node[me[j]] ->
				printf("h: CLAIM: P%d's g(%d) reaches P%d, whose node is there\n", who, s, j);
				assert(false)
			:: else -> skip
			fi;
			j++
		:: else -> break
		od
	:: else -> skip
	fi;
#endif
	notify(wg[s], GRANT, s)
}

inline decide() {
	holding[i] = true;
	nholders++;
	printf("h: P%d holds (node %d)\n", i, me[i]);
	if
	:: nholders > 1 -> printf("h: VIOLATION: %d holders at once\n", nholders)
	:: else -> skip
	fi;
	assert(nholders <= 1)
}

/* The fire: one multi [check(own node), create g(dirty), delete g(dirty)]. */
inline fire() {
#ifndef UNCHECKED_FIRE
	if
	:: !node[me[i]] -> printf("h: P%d fires g(%d): fails, its node is gone\n", i, dirty)
	:: else ->
#endif
		printf("h: P%d fires g(%d): one multi, create and delete it\n", i, dirty);
		mkgrant(dirty, i, true);
		grant[dirty] = false
#ifndef UNCHECKED_FIRE
	fi;
#endif
	dirty = 0
}

/* The session expires, at any step of the participant's from its join:
 * its node vanishes in one transaction, its watches vanish, its
 * notifications stop; a hold ends first (lease deadline). The participant
 * does nothing more. */
inline expire() {
	expired[i] = true;
	printf("h: FAULT: P%d's session expires\n", i);
	if
	:: holding[i] -> holding[i] = false; nholders--; printf("h:   P%d's hold ends (its lease deadline)\n", i)
	:: else -> skip
	fi;
	s = 1;
	do
	:: s <= N ->
		wg[s] = wg[s] & ~BIT(i);
		wn[s] = wn[s] & ~BIT(i);
		s++
	:: else -> break
	od;
	if
	:: node[me[i]] -> delnode(me[i])
	:: else -> skip
	fi
}

proctype Participant(byte i) {
	byte s, j, dirty, done;
	bool quitter, doomed;

	/* A waiter that will give up, or whose session may expire, says so
	 * when it joins, so that one that will not and waits for ever is a
	 * deadlock spin reports, not a state it could leave by giving up or
	 * expiring. */
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
		printf("h: P%d creates node %d\n", i, nseq)
	}
read:
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { dirty != 0 -> fire() }
	:: atomic {
		!node[me[i]] ->
		/* Its pending fire would fail too: its node is gone. */
		printf("h: P%d reads the children: its node is gone, requeues (ends)\n", i);
		goto gone
	   }
	:: atomic {
		node[me[i]] ->
		cur[i] = 0;
		s = 1;
		do
		:: s < me[i] -> if
			:: node[s] -> cur[i] = s
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		dmail[i] = 0;
#ifndef ANY_GRANT
		gmail[i] = 0;
#endif
		if
		:: cur[i] == 0 -> printf("h: P%d reads the children: first\n", i); decide(); goto hold
		:: else -> printf("h: P%d reads the children: predecessor %d\n", i, cur[i]); done = 0; goto setup
		fi
	   }
	od;
setup:
	/* The three watches, in any order. A pending fire went before them. */
	do
	:: atomic { doomed -> expire(); goto gone }
	:: atomic { dirty != 0 && done == 0 -> fire() }
	:: atomic {
		dirty == 0 && !(done & 1) ->
		printf("h: P%d exists g(%d), watch: no\n", i, cur[i]);
		wg[cur[i]] = wg[cur[i]] | BIT(i);
		done = done | 1;
		if
		:: done == 7 -> goto wait
		:: else -> skip
		fi
	   }
	:: atomic {
		dirty == 0 && !(done & 2) ->
		if
		:: node[cur[i]] -> printf("h: P%d getData %d, watch\n", i, cur[i]); wn[cur[i]] = wn[cur[i]] | BIT(i)
		:: else -> printf("h: P%d getData %d: gone\n", i, cur[i]); dmail[i] = dmail[i] | BIT(cur[i])
		fi;
		done = done | 2;
		if
		:: done == 7 -> goto wait
		:: else -> skip
		fi
	   }
	:: atomic {
		dirty == 0 && !(done & 4) ->
		if
		:: node[me[i]] -> printf("h: P%d getData own %d, watch\n", i, me[i]); wn[me[i]] = wn[me[i]] | BIT(i)
		:: else -> printf("h: P%d getData own %d: gone\n", i, me[i]); omail[i] = true
		fi;
		done = done | 4;
		if
		:: done == 7 -> goto wait
		:: else -> skip
		fi
	   }
	od;
wait:
	do
	:: atomic { doomed -> expire(); goto gone }
#ifdef ANY_GRANT
	:: atomic {
		gmail[i] != 0 ->
		s = 1;
		do
		:: !(gmail[i] & BIT(s)) -> s++
		:: else -> break
		od;
#else
	:: atomic {
		(gmail[i] & BIT(cur[i])) ->
		s = cur[i];
#endif
		if
#ifndef NO_OWN_CHECK
		:: omail[i] -> printf("h: P%d told g(%d) created, but its own watch fired: requeues (ends)\n", i, s); goto gone
#endif
		:: else -> printf("h: P%d told g(%d) created: holds, no read\n", i, s); decide(); goto hold
		fi
	   }
	:: atomic {
		(dmail[i] & BIT(cur[i])) && !(gmail[i] & BIT(cur[i])) ->
#ifdef NO_READ
		printf("h: P%d told %d deleted: holds with no read\n", i, cur[i]);
		decide();
		goto hold
#else
		printf("h: P%d told %d deleted, no grant: reads again, fires g(%d)\n", i, cur[i], cur[i]);
		dirty = cur[i];
		goto read
#endif
	   }
	:: atomic {
		omail[i] ->
		printf("h: P%d told its node %d deleted: requeues (ends)\n", i, me[i]);
		goto gone
	   }
	:: atomic {
		quitter ->
		if
		:: node[me[i]] ->
			printf("h: P%d gives up: one multi, create g(%d), delete node %d, delete g(%d)\n", i, cur[i], me[i], cur[i]);
			mkgrant(cur[i], i, true);
			delnode(me[i]);
			grant[cur[i]] = false
		:: else ->
			printf("h: P%d gives up: its node is gone, no write\n", i)
		fi;
		goto gone
	   }
	od;
hold:
	do
	:: atomic { doomed -> expire(); goto gone }  /* the hold ends first */
	:: atomic { dirty != 0 -> fire() }
	:: atomic {
		dirty == 0 ->
		holding[i] = false;
		nholders--;
		printf("h: P%d releases: one multi, create g(%d), delete node %d, delete g(%d)\n", i, me[i], me[i], me[i]);
		mkgrant(me[i], i, false);
		delnode(me[i]);
		grant[me[i]] = false;
		goto gone
	   }
	:: atomic {
		/* A holder that takes no part in the handoff (its lock's
		 * tokens are asked for, and grants come without their zxid:
		 * participant.handsOff) releases with a plain delete. */
		dirty == 0 ->
		holding[i] = false;
		nholders--;
		printf("h: P%d releases with a plain delete, no grant\n", i);
		delnode(me[i]);
		goto gone
	   }
	od;
gone:
	atomic {
		fin[i] = true;
		gmail[i] = 0;
		dmail[i] = 0;
		omail[i] = false;
		s = 0;
		j = 0;
		done = 0;
		quitter = false;
		doomed = false
	}
}

/* An operator deletes a node that is not first in the queue. */
#define AHEAD(s) ((node[1] && 1 < s) || (node[2] && 2 < s) || (node[3] && 3 < s))
inline opdelete(t) {
	ndel++;
	printf("h: FAULT: an operator deletes node %d (P%d's)\n", t, t - 1);
	delnode(t)
}

proctype Deleter() {
	byte j;
end:	/* it may delete fewer, or none */
	do
	:: atomic { ndel < MAXDEL && node[2] && AHEAD(2) -> opdelete(2) }
	:: atomic { ndel < MAXDEL && node[3] && AHEAD(3) -> opdelete(3) }
#if N > 3
	:: atomic { ndel < MAXDEL && node[4] && AHEAD(4) -> opdelete(4) }
#endif
	od
}

init {
	byte p = 0, j, s;
	atomic {
		do
		:: p < N -> run Participant(p); p++
		:: else -> break
		od;
		run Deleter()
	}
	/* When everyone has finished: no node, no grant left. */
#if N > 3
	(fin[0] && fin[1] && fin[2] && fin[3]);
#else
	(fin[0] && fin[1] && fin[2]);
#endif
	s = 1;
	do
	:: s <= N ->
		assert(!node[s]);
		if
		:: grant[s] -> printf("h: ORPHAN: g(%d) stays\n", s); assert(false)
		:: else -> skip
		fi;
#ifdef WATCH_CHECK
		/* No live session is left exists-watching a g(*). */
		j = 0;
		do
		:: j < N ->
			if
			:: (wg[s] & BIT(j)) && !expired[j] ->
				printf("h: WATCH LEFT: P%d's exists-watch on g(%d) stays, its session live\n", j, s);
				assert(false)
			:: else -> skip
			fi;
			j++
		:: else -> break
		od;
#endif
		s++
	:: else -> break
	od
}
