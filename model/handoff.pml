/*
 * zklock's mutex handoff by grant (issue 37), modelled before it is built.
 * There is no code yet: the code must follow this model, and
 * docs/model.md ("The handoff model") maps every variable to the design.
 *
 * N participants (one session each) join one queue once: each creates an
 * ephemeral-sequential node (sequence numbers only grow), reads the
 * children, holds if first, else exists-watches g(P) and getData-watches
 * P, P its immediate predecessor. A holder releases with one multi:
 * create g(own) (ephemeral, of its session), delete its node, and delete
 * g(P) if it held by P's grant. A waiter notified that g(P) was created
 * holds at once, with no read; notified that P was deleted (no grant
 * before it), it reads the children again. Each session's notifications
 * are queued (zxid order) and read whenever the participant next runs:
 * late, as ZooKeeper delivers them.
 *
 * Faults: up to MAXEXP sessions expire, at any step: their ephemerals
 * (node and grants) vanish at once, with no grant, and a hold ends then
 * (the lease deadline ends it before the session's nodes can vanish).
 * Up to MAXGIVEUP waiters give up: they delete their node, with no grant.
 *
 * Safety: never two holders (nholders <= 1, asserted at every decision).
 * Progress: every participant ends (holds and releases, gives up, or
 * expires); a waiter blocked while everyone ahead has left is an invalid
 * end state, which spin reports (a waiter that does not give up cannot
 * leave a wait by giving up, see quitter).
 *
 * Broken variants (-D), which must be refuted:
 *   NO_READ     a waiter holds when P is deleted without a grant, with no
 *               read (a predecessor that gave up is not a release)
 *   ANY_GRANT   a waiter takes any grant it sees or is told of, not only
 *               g(P) of its immediate predecessor at its watch
 * Variants that model/run.sh does not run, because they are safe here
 * (docs/model.md says why):
 *   SPLIT_GRANT the grant is a separate write after the delete
 *   PERSISTENT  the grant is persistent and never deleted by its receiver
 * A finding, not a variant:
 *   ORPHAN_CHECK  asserts that no grant is left once everyone has finished:
 *                 the design as modelled fails it (docs/model.md)
 */

#ifndef N
#define N 3
#endif
/* Faults per run: two expiries and two give-ups (3 and 3: 0 errors too,
 * 14.7 million states, 21 s; too long for make model). */
#ifndef MAXEXP
#define MAXEXP 2
#endif
#ifndef MAXGIVEUP
#define MAXGIVEUP 2
#endif

/* Expiry and the orphan check name each participant: N is 3. */
#if N != 3
#error "handoff.pml: N must be 3"
#endif

#define GRANT 1 /* NodeCreated on g(s) */
#define DEL   2 /* NodeDeleted on node s */
#define EVQ   (2 * N)

/* The server: indexed by sequence number, 1..N (0: none). */
byte nseq;              /* the last sequence number given */
bool node[N + 1];       /* queue node s exists */
byte nowner[N + 1];     /* its participant */
bool grant[N + 1];      /* g(s) exists */
byte gowner[N + 1];     /* the session that created g(s) */
byte wg[N + 1];         /* participants (bits) exists-watching g(s) */
byte wn[N + 1];         /* participants (bits) getData-watching node s */

/* Participants. */
chan ev[N] = [EVQ] of { byte, byte };  /* each session's notifications, zxid order */
bool expired[N];
bool holding[N];
bool fin[N];
byte nholders;
byte nexp, ngiveup;

#define BIT(i) (1 << (i))

/* Fire the watches of a write: a one-shot watch is queued to its session. */
inline fire(w, kind, s) {
	j = 0;
	do
	:: j < N ->
		if
		:: (w & BIT(j)) && !expired[j] -> assert(len(ev[j]) < EVQ); ev[j]!kind, s
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	w = 0
}

inline delnode(s) {
	node[s] = false;
	fire(wn[s], DEL, s)
}

inline delgrant(s) {
	grant[s] = false
}

inline mkgrant(s, who) {
	grant[s] = true;
	gowner[s] = who;
	fire(wg[s], GRANT, s)
}

inline decide(i) {
	holding[i] = true;
	nholders++;
	printf("h: P%d holds (node %d)\n", i, me);
	if
	:: nholders > 1 -> printf("h: VIOLATION: %d holders at once\n", nholders)
	:: else -> skip
	fi;
	assert(nholders <= 1)
}

proctype Participant(byte i) {
	byte me, pred, s, k, es, j;
	bool bygrant, quitter;

	/* A waiter that will give up says so at its start, so that one that
	 * will not and waits forever is a deadlock spin reports, not a state
	 * it could leave by giving up. */
	atomic {
		if
		:: expired[i] -> goto gone
		:: else -> skip
		fi;
		if
		:: ngiveup < MAXGIVEUP -> ngiveup++; quitter = true
		:: true -> skip
		fi;
		nseq++;
		me = nseq;
		node[me] = true;
		nowner[me] = i;
		
		printf("h: P%d creates node %d\n", i, me)
	}
read:
	atomic {
		if
		:: expired[i] -> goto gone
		:: else -> skip
		fi;
		
		pred = 0;
		s = 1;
		do
		:: s < me -> if
			:: node[s] -> pred = s
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
#ifdef ANY_GRANT
		s = 1;
		do
		:: s <= N && grant[s] -> printf("h: P%d reads the children: g(%d) is there\n", i, s); bygrant = true; pred = s; goto hold
		:: s <= N && !grant[s] -> s++
		:: else -> break
		od;
#endif
		if
		:: pred == 0 -> printf("h: P%d reads the children: first\n", i); bygrant = false; goto hold
		:: else -> printf("h: P%d reads the children: predecessor %d\n", i, pred)
		fi
	}
	/* exists(g(P), watch), then getData(P, watch): two requests. */
	atomic {
		if
		:: expired[i] -> goto gone
		:: grant[pred] ->  printf("h: P%d exists g(%d): yes\n", i, pred); bygrant = true; goto hold
		:: else -> wg[pred] = wg[pred] | BIT(i)
		fi
	}
	atomic {
		if
		:: expired[i] -> goto gone
		:: !node[pred] ->  printf("h: P%d getData %d: gone, reads again\n", i, pred); goto read
		:: else -> wn[pred] = wn[pred] | BIT(i)
		fi
	}
	do
	:: atomic {
		ev[i]?k, es ->
		
		if
		:: expired[i] -> goto gone
#ifdef ANY_GRANT
		:: k == GRANT -> printf("h: P%d told g(%d) created\n", i, es); bygrant = true; pred = es; goto hold
#else
		:: k == GRANT && es == pred -> printf("h: P%d told g(%d) created\n", i, es); bygrant = true; goto hold
#endif
#ifdef NO_READ
		:: k == DEL && es == pred -> printf("h: P%d told %d deleted: holds with no read\n", i, es); bygrant = false; goto hold
#else
		:: k == DEL && es == pred -> printf("h: P%d told %d deleted, no grant: reads again\n", i, es); goto read
#endif
		:: else -> printf("h: P%d ignores a stale notification (%d on %d)\n", i, k, es)
		fi
	   }
	:: atomic {
		quitter && !expired[i] ->
		
		printf("h: FAULT: P%d gives up: deletes node %d, no grant\n", i, me);
		delnode(me);
		goto gone
	   }
	:: expired[i] -> goto gone
	od;
hold:
	atomic {
		if
		:: expired[i] -> goto gone
		:: else -> decide(i)
		fi
	}
	/* Release: one multi, unless SPLIT_GRANT. */
	atomic {
		if
		:: expired[i] -> goto gone  /* the expiry ended the hold */
		:: else -> skip
		fi;
		holding[i] = false;
		nholders--;
		
#ifdef SPLIT_GRANT
		printf("h: P%d releases: deletes node %d (the grant to follow)\n", i, me);
		delnode(me);
#else
		printf("h: P%d releases: one multi, create g(%d), delete node %d\n", i, me, me);
		mkgrant(me, i);
		delnode(me);
#endif
#ifndef PERSISTENT
		if
		:: bygrant && grant[pred] -> delgrant(pred)
		:: else -> skip  /* held by a read; or the granting session expired: its grant vanished (the multi fails, the release retries without it) */
		fi
#endif
	}
#ifdef SPLIT_GRANT
	atomic {
		if
		:: expired[i] -> goto gone
		:: else ->  printf("h: P%d creates g(%d)\n", i, me); mkgrant(me, i)
		fi
	}
#endif
gone:
	fin[i] = true
}

/* A session expires at any step: its ephemerals vanish at once, no grant. */
proctype Expiry() {
	byte i, s, j;
	do
	:: nexp < MAXEXP ->
		atomic {
			/* a finished participant's session too: its grant vanishes */
			if
			:: !expired[0] -> i = 0
			:: !expired[1] -> i = 1
			:: !expired[2] -> i = 2
			fi;
			nexp++;
			expired[i] = true;
			
			printf("h: FAULT: P%d's session expires\n", i);
			if
			:: holding[i] -> holding[i] = false; nholders--; printf("h:   P%d's hold ends (its lease deadline)\n", i)
			:: else -> skip
			fi;
			s = 1;
			do
			:: s <= N ->
#ifndef PERSISTENT
				if
				:: grant[s] && gowner[s] == i -> delgrant(s)
				:: else -> skip
				fi;
#endif
				if
				:: node[s] && nowner[s] == i -> delnode(s)
				:: else -> skip
				fi;
				s++
			:: else -> break
			od
		}
	:: break
	od
}

init {
	byte p = 0;
	atomic {
		do
		:: p < N -> run Participant(p); p++
		:: else -> break
		od;
		run Expiry()
	}
#ifdef ORPHAN_CHECK
	/* When everyone has finished, no grant is left behind. */
	(fin[0] && fin[1] && fin[2]);
	p = 1;
	do
	:: p <= N ->
		if
		:: grant[p] -> printf("h: ORPHAN: g(%d) of P%d stays, no one will delete it\n", p, gowner[p]); assert(false)
		:: else -> skip
		fi;
		p++
	:: else -> break
	od
#endif
}
