/*
 * zklock's lease deadline against ZooKeeper's session tracking.
 *
 * One process steps a discrete clock, one unit at a time (params.h). Each
 * step makes its choices (the faults, when a stale leader stops and a new
 * one starts, a ping's delay, a reconnect), then, in one d_step: the
 * faults; the leaders, whose expiries fall due before anything that
 * arrives in the same unit; client 1 (its lease's end at the deadline,
 * answers, the keeper, go-zookeeper's pings); the packets that arrive; the
 * leader's ping to the follower F and F's reply with the touches it
 * recorded (after the packets of the same unit: a packet that arrives with
 * a ping is relayed by it, the sharper case); and then the property.
 * docs/model.md maps every variable to the code and to the ZooKeeper
 * source it stands for.
 *
 * Safety: client 2 never holds while client 1's Hold.Err would still
 * return nil (C1HELD). Liveness, bounded: at HORIZON, when the faults have
 * stopped changing since FAULTEND, someone holds.
 *
 * Variants (-D):
 *   NO_DEADLINE    the lease ends only on connection events (Disconnected,
 *                  Expired): the design before the deadline.
 *   FROM_REPLY     Confirm counts from when the reply is read, not from
 *                  when the write went out.
 *   SYNC_CONFIRMS  the keeper sends a sync, and its answer confirms.
 *   CUT_BUFFERS    what crosses the follower's cut is delivered when it
 *                  heals (TCP), not lost: outside the design's assumptions.
 * and any constant of params.h, e.g. -DMARGIN=0. model/run.sh runs them.
 */
#include "params.h"

#define NONE     (-1)
/* ExpiryQueue.roundToNextInterval rounds up to the next tick, strictly
 * after; the model rounds up to the tick at or after, the limit of the
 * strict rounding in continuous time: an expiry never later than ZooKeeper's. */
#define CEILTICK(x) ((((x) - gphase + TICK - 1) / TICK) * TICK + gphase)

/* Client 1's connection. */
#define OFF  0
#define ON_F 1  /* to the follower F */
#define ON_Q 2  /* to a server of the quorum's side, after a reconnect */

/* Packets of client 1. */
#define K_PING    1
#define K_CHECK   2  /* Conn.Check: a write that changes nothing */
#define K_SYNC    3
#define K_DEL     4  /* the janitor deletes the node of a lost lease */
#define K_CONNECT 5

#define HIST 12 /* sent packets kept by the model's wire: one a unit, as wireGrain keeps one per T/24 (see prune) */
#define QN   4  /* packets in flight from client 1 to its server */

#ifdef SYNC_CONFIRMS
#define K_CONFIRM K_SYNC
#else
#define K_CONFIRM K_CHECK
#endif

#ifdef NO_DEADLINE
#define C1HELD (lease)
#else
#define C1HELD (lease && now < dl)
#endif

short now;

/* ---- servers ---- */
byte  lphase;          /* L1's ping phase */
byte  gphase;          /* the phase of the leader's expiry buckets (its tick grid) */
bool  replaced;        /* fault: L1 lost the quorum, a new leader L2 follows */
bool  l1up = true;     /* L1 runs: after `replaced`, a stale leader until it notices */
short l1from, l1by;    /* after `replaced`: when L1 may, and must, notice */
bool  l2up;            /* L2 leads */
short l2from, l2by;    /* when L2 may, and must, start */
short lexp;            /* the quorum leader's expiry bucket for C1's session */
bool  expired;         /* the quorum expired C1's session (and deleted its node) */
bool  nodegone;        /* C1's node is gone */
bool  c2holds;

bool  fcut;            /* fault: F cut off from the leader */
bool  fwithl1;         /* after `replaced`: F is on L1's side */
bool  fserves = true;  /* F serves clients */
bool  ftouched;        /* C1 touched F since F's last ping reply */
short flast;           /* when F last heard from its leader */
short pingat = NONE;   /* when the leader's ping in flight reaches F */
bool  fheld;           /* a write of C1 waits at F: F holds C1's later requests */
bool  bufw;            /* CUT_BUFFERS: a forwarded write waits on the cut link */
bool  bufp;            /* CUT_BUFFERS: a leader's ping waits on the cut link */
short relayat = NONE;  /* CUT_BUFFERS: when F's reply to the buffered ping arrives */

/* ---- client 1 ---- */
byte  c1on = ON_F;
byte  fphase;          /* the connection's connect request, modulo CPING: go-zookeeper's ping phase */
short hist[HIST];      /* when packets went out, newest first; NONE: unused */
byte  hn = 1;
short qa[QN];          /* packets in flight: arrival */
byte  qk[QN];          /*                    kind */
byte  qn;
short dl;              /* Session.deadline */
short confirmed;       /* Session.confirmed */
short retryat;         /* keeper.retryAt */
bool  lease = true;    /* the Hold has not ended */
bool  paused;          /* fault: the process is paused */
bool  evdrop;          /* a Disconnected event not yet seen (paused) */
bool  evexp;           /* an Expired event not yet seen */
bool  knowsexpired;
byte  ik;              /* the keeper's or janitor's request in flight, 0: none */
short isent, iw;       /* its send time, and sentBy(isent - THIRD) */
bool  ireply;          /* its answer arrived, unread */
short lastread;        /* go-zookeeper's last read (recvTimeout) */
bool  gotdata;         /* something arrived while paused */

/* ---- faults ---- */
byte  nfaults;
bool  cutdone, pausedone, repldone;

short i, j, x;         /* scratch, zero between steps */
/* The step's nondeterministic choices, made before its deterministic rest
 * (a d_step) and reset after it. */
byte  fev;             /* the fault event: one of FEV_* */
bool  l1stop, l2start, reconn;
byte  pd;              /* the leader's ping's delay */
byte  cdel;            /* client packets' delay */

#define FEV_CUT     1
#define FEV_HEAL    2
#define FEV_PAUSE   3
#define FEV_RESUME  4
#define FEV_REPL_L1 5  /* the leader replaced; F stays on the old leader's side */
#define FEV_REPL_Q  6  /* the leader replaced; F on the quorum's side */

#define QUORUM_UP (!replaced || l2up)

inline touchLeader() {
	if
	:: !expired ->
		lexp = CEILTICK(now + T - DRIFT);
		printf("t=%d   the leader touches C1's session: expiry at %d\n", now, lexp)
	:: else -> skip
	fi
}

/* wire.sentBy(x): the latest packet that went out no later than x, else the
 * connect request (the oldest kept: prune never drops it before a later
 * packet is old enough). */
inline sentBy(at, res) {
	res = hist[hn-1]; i = 0;
	do
	:: i < hn && hist[i] > at -> i++
	:: i < hn && hist[i] <= at -> res = hist[i]; break
	:: i >= hn -> break
	od
}

/* prune keeps what sentBy can still return: the packets after now - THIRD
 * and the latest one before (queries are never older), so that states
 * that differ only in forgotten history are one. */
inline prune() {
	i = 0;
	do
	:: i < hn && hist[i] > now - THIRD -> i++
	:: i < hn && hist[i] <= now - THIRD -> hn = i + 1; break
	:: i >= hn -> break
	od
}

inline send(kind) {
	if
	:: hist[0] != now ->
		assert(hn < HIST);
		j = hn;
		do
		:: j > 0 -> hist[j] = hist[j-1]; j--
		:: else -> break
		od;
		hist[0] = now; hn++
	:: else -> skip
	fi;
	assert(qn < QN);
	/* FIFO: never before the packet ahead of it */
	x = now;
	if
	:: qn > 0 && qa[qn-1] > x -> x = qa[qn-1]
	:: else -> skip
	fi;
	if
	:: x < now + cdel -> x = now + cdel
	:: else -> skip
	fi;
	qa[qn] = x; qk[qn] = kind; qn++
}

inline dropConn() {
	c1on = OFF; qn = 0; fheld = false; bufw = false;
	if
	:: ik != 0 -> ik = 0; ireply = false; retryat = now + RETRY
	:: else -> skip
	fi
}

/* The server ends C1's connection (F stops serving). */
inline serverDrops() {
	if
	:: c1on == ON_F ->
		printf("t=%d   F stops serving: C1's connection ends\n", now);
		dropConn();
		evdrop = true
	:: else -> skip
	fi
}

/* Session.Confirm(sent): the deadline w + T - T/20. */
inline confirm(sent, w) {
	if
	:: sent > confirmed -> confirmed = sent
	:: else -> skip
	fi;
	if
	:: w + T - MARGIN > dl ->
		dl = w + T - MARGIN;
		printf("t=%d C1 confirmed a write sent at %d: w=%d, deadline %d\n", now, sent, w, dl)
	:: else -> skip
	fi
}

/* A write of C1 reaches the quorum leader and commits. */
inline commit(kind) {
	if
	:: expired -> skip  /* answered SessionExpired: confirms nothing */
	:: else ->
		ireply = true;
		if
		:: kind == K_DEL ->
			nodegone = true; c2holds = true;
			printf("t=%d   C1's janitor deleted its node: C2 holds\n", now)
		:: else -> printf("t=%d   the quorum commits C1's write sent at %d\n", now, isent)
		fi
	fi
}

/* A packet of C1 reaches its server. */
inline arrive(kind) {
	if
	:: c1on == ON_F && fserves ->
		ftouched = true;  /* LearnerSessionTracker.touchSession: touchTable */
		if
		:: kind == K_PING ->
			if
			:: !fheld -> lastread = now; gotdata = paused
			:: else -> skip  /* CommitProcessor holds it behind the write */
			fi
		:: kind == K_CHECK || kind == K_DEL ->
			if
			:: fheld -> skip
			:: !fcut && !replaced -> commit(kind)
			:: else ->
				fheld = true;
				printf("t=%d   F forwards C1's write; no quorum answers\n", now);
				if
				:: fcut -> bufw = true
				:: else -> skip
				fi
			fi
		:: kind == K_SYNC ->
			if
			:: !fcut && l1up ->
				ireply = true;  /* Leader.processSync answers alone */
				printf("t=%d   L1 answers C1's sync\n", now)
			:: else -> skip
			fi
		fi
	:: c1on == ON_Q && QUORUM_UP ->
		touchLeader();
		if
		:: kind == K_CONNECT && expired ->
			knowsexpired = true; lease = false;
			printf("t=%d C1 learns its session expired\n", now)
		:: kind == K_CHECK || kind == K_DEL -> commit(kind)
		:: kind == K_SYNC -> ireply = true
		:: else -> lastread = now; gotdata = paused
		fi
	:: else -> skip
	fi
}

#define CAN_FAULT (now <= FAULTEND && nfaults < MAXFAULTS)
#define PINGS_NOW (now >= lphase && (now - lphase) % LPING == 0)

active proctype world() {
	/* The start: C1 connected to F at 0, created its node in a write sent
	 * at 0 (w is the connect request), and holds. The leader created the
	 * session at 0. L1's pings have some phase. */
	atomic {
		do
		:: gphase < GPHASES - 1 -> gphase++
		:: true -> break
		od;
		dl = T - MARGIN;
		lexp = CEILTICK(T - DRIFT);
		do
		:: lphase < LPHASES - 1 -> lphase++
		:: true -> break
		od;
		printf("t=0 C1 holds, deadline %d; the leader's expiry buckets every %d from %d, expiry at %d; its pings every %d from %d\n",
			dl, TICK, gphase, lexp, LPING, lphase)
	};

	do
	:: now > HORIZON -> break
	:: else ->
		/* ---- the choices, made before the step's deterministic rest ---- */
		atomic {
			if
			:: true
			:: CAN_FAULT && !cutdone && c1on == ON_F && !replaced -> fev = FEV_CUT
			:: now <= FAULTEND && fcut -> fev = FEV_HEAL
			:: CAN_FAULT && !pausedone -> fev = FEV_PAUSE
			:: now <= FAULTEND && paused -> fev = FEV_RESUME
			:: CAN_FAULT && !repldone && c1on == ON_F && !fcut -> fev = FEV_REPL_L1
			:: CAN_FAULT && !repldone && c1on == ON_F && !fcut -> fev = FEV_REPL_Q
			fi;
			if
			:: replaced && l1up && now >= l1from -> l1stop = true
			:: true -> l1stop = (replaced && l1up && now >= l1by)
			fi;
			if
			:: replaced && !l2up && now >= l2from -> l2start = true
			:: true -> l2start = (replaced && !l2up && now >= l2by)
			fi;
			do
			:: PINGS_NOW && pd < PDELAY -> pd++
			:: true -> break
			od;
			if
			:: c1on == OFF -> reconn = true
			:: true
			fi;
			do
			:: c1on != OFF && cdel < CDELAY -> cdel++
			:: true -> break
			od
		};
		d_step {
		prune();

		/* ---- faults ---- */
		if
		:: fev == FEV_CUT ->
			fcut = true; cutdone = true; nfaults++;
			printf("t=%d FAULT: F is cut off from the leader\n", now)
		:: fev == FEV_HEAL ->
			fcut = false;
			printf("t=%d FAULT: F's cut heals\n", now);
#ifdef CUT_BUFFERS
			if
			:: fserves && bufw -> bufw = false; fheld = false;
				printf("t=%d   the write F forwarded during the cut reaches the leader\n", now);
				commit(K_CHECK)
			:: else -> bufw = false
			fi;
			if
			:: fserves && bufp -> relayat = now + 1
			:: else -> skip
			fi;
#endif
			bufp = false
		:: fev == FEV_PAUSE ->
			paused = true; pausedone = true; nfaults++;
			printf("t=%d FAULT: C1 pauses\n", now)
		:: fev == FEV_RESUME ->
			paused = false;
			printf("t=%d FAULT: C1 resumes\n", now)
		:: fev == FEV_REPL_L1 || fev == FEV_REPL_Q ->
			replaced = true; repldone = true; nfaults++;
			fwithl1 = (fev == FEV_REPL_L1);
			l1from = now + SYNCLIMIT*TICK - LPING - PDELAY;
			l1by = now + (SYNCLIMIT+1)*TICK;
			l2from = now + SYNCLIMIT*TICK - LPING - PDELAY;
			l2by = now + (SYNCLIMIT+1)*TICK;
			printf("t=%d FAULT: L1 is cut off from the quorum (F with L1: %d)\n", now, fwithl1)
		:: else -> skip
		fi;

		/* ---- leaders ---- */
		if
		:: l1stop ->
			l1up = false;
			printf("t=%d L1 notices it lost the quorum and stops\n", now);
			if
			:: fwithl1 -> fserves = false; serverDrops()
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: l2start ->
			/* SessionTrackerImpl's constructor: trackSession for each */
			l2up = true;
			printf("t=%d L2 leads, and restarts every session\n", now);
			touchLeader()
		:: else -> skip
		fi;
		/* SessionTrackerImpl.run, ExpiryQueue.poll: before this unit's packets */
		if
		:: QUORUM_UP && !expired && now >= lexp ->
			expired = true; nodegone = true; c2holds = true;
			printf("t=%d the leader expires C1's session, deletes its node: C2 holds\n", now)
		:: else -> skip
		fi;
		/* the server C1 is connected to closes its connection; go-zookeeper
		 * reports Expired once the process runs */
		if
		:: expired && !evexp && !knowsexpired && (c1on == ON_F && !fcut && !replaced && fserves || c1on == ON_Q) ->
			evexp = true; dropConn()
		:: else -> skip
		fi;

		/* ---- client 1 ---- */
		/* Hold.Err compares the clock with the deadline, paused or not */
#ifndef NO_DEADLINE
		if
		:: lease && now >= dl -> lease = false;
			printf("t=%d C1's lease ends at its deadline %d\n", now, dl)
		:: else -> skip
		fi;
#endif
		if
		:: !paused ->
			if
			:: gotdata -> gotdata = false; lastread = now
			:: else -> skip
			fi;
			if
			:: evexp -> evexp = false; knowsexpired = true; lease = false;
				printf("t=%d C1 sees Expired: its lease ends\n", now)
			:: else -> skip
			fi;
			/* the answer to the keeper's request */
			if
			:: ireply ->
				ireply = false; lastread = now;
				if
				:: ik == K_CHECK || ik == K_SYNC ->
#ifdef FROM_REPLY
					sentBy(now - THIRD, x);
					confirm(now, x)
#else
					confirm(isent, iw)
#endif
				:: else -> skip
				fi;
				ik = 0
			:: else -> skip
			fi;
			/* keeper.confirm's stall, go-zookeeper's recvTimeout */
			if
			:: c1on != OFF && ik != 0 && now - isent >= THIRD ->
				printf("t=%d C1's keeper: no answer for T/3, drops the connection\n", now);
				dropConn(); evdrop = true
			:: c1on != OFF && now - lastread >= RECV ->
				printf("t=%d C1: nothing read for 2T/3, the connection ends\n", now);
				dropConn(); evdrop = true
			:: else -> skip
			fi;
			if
			:: evdrop ->
				evdrop = false;
#ifdef NO_DEADLINE
				if
				:: lease -> lease = false;
					printf("t=%d C1 sees Disconnected: its lease ends\n", now)
				:: else -> skip
				fi
#else
				skip
#endif
			:: else -> skip
			fi;
			/* go-zookeeper connects to the next server */
			if
			:: c1on == OFF && reconn && QUORUM_UP && !knowsexpired ->
				c1on = ON_Q; fphase = now % CPING; lastread = now;
				j = 0;
				do
				:: j < HIST -> hist[j] = NONE; j++
				:: else -> break
				od;
				hn = 0;
				printf("t=%d C1 reconnects, to a server on the quorum's side\n", now);
				send(K_CONNECT)
			:: else -> skip
			fi;
			/* the keeper (nextConfirmation) and the janitor */
			if
			:: c1on != OFF && !knowsexpired && ik == 0 ->
				if
				:: lease ->
					x = confirmed + THIRD;
					if
					:: dl - QUARTER < x -> x = dl - QUARTER
					:: else -> skip
					fi;
					if
					:: retryat > x -> x = retryat
					:: else -> skip
					fi;
					if
					:: now >= x ->
						ik = K_CONFIRM; isent = now;
						sentBy(now - THIRD, iw);
						printf("t=%d C1's keeper sends a confirmation (w would be %d)\n", now, iw);
						send(K_CONFIRM)
					:: else -> skip
					fi
				:: !lease && !nodegone && now >= retryat ->
					ik = K_DEL; isent = now;
					send(K_DEL)
				:: else -> skip
				fi
			:: else -> skip
			fi;
			/* go-zookeeper's sendLoop pings every pingInterval */
			if
			:: c1on != OFF && hist[0] != now && now % CPING == fphase -> send(K_PING)
			:: else -> skip
			fi
		:: else -> skip
		fi;

		/* ---- packets that arrive ---- */
		do
		:: qn > 0 && qa[0] <= now ->
			arrive(qk[0]);
			j = 1;
			do
			:: j < qn -> qa[j-1] = qa[j]; qk[j-1] = qk[j]; j++
			:: else -> break
			od;
			qn--; qa[qn] = 0; qk[qn] = 0
		:: else -> break
		od;

		/* ---- the leader's ping to F, F's reply with its touches ---- */
		if
		:: l1up && PINGS_NOW && (!replaced || fwithl1) ->
			if
			:: !fcut -> pingat = now + pd
			:: else -> bufp = true
			fi
		:: else -> skip
		fi;
		if
		:: pingat == now || relayat == now ->
			if
			:: pingat == now -> pingat = NONE
			:: else -> relayat = NONE
			fi;
			if
			:: !fcut && fserves ->
				flast = now;
				if
				:: ftouched ->
					ftouched = false;
					printf("t=%d   F relays C1's touch in its ping reply\n", now);
					if
					:: !replaced -> touchLeader()  /* LearnerHandler: PING -> touch */
					:: else -> skip                /* to L1, which no longer counts */
					fi
				:: else -> skip
				fi
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* F leaves a leader it has not heard from for syncLimit ticks
		 * (Learner's socket timeout), and stops serving. */
		if
		:: fserves && (fcut || replaced && !fwithl1) && now - flast >= SYNCLIMIT*TICK ->
			fserves = false; serverDrops()
		:: else -> skip
		fi;

		/* ---- the property ---- */
		if
		:: c2holds && C1HELD ->
			printf("t=%d VIOLATION: C2 holds while C1's Err() is nil (deadline %d)\n", now, dl)
		:: else -> skip
		fi;
		assert(!(c2holds && C1HELD));
		if
		:: now == HORIZON && !(c2holds || C1HELD) ->
			printf("t=%d NOBODY HOLDS at the horizon\n", now)
		:: else -> skip
		fi;
		assert(now < HORIZON || c2holds || C1HELD);

		/* Canonical values for what no longer matters, so that such
		 * states are one. */
		if
		:: retryat <= now -> retryat = 0
		:: else -> skip
		fi;
		if
		:: ik == 0 -> isent = 0; iw = 0
		:: else -> skip
		fi;
		if
		:: !fserves -> flast = 0; pingat = NONE; ftouched = false; fheld = false; bufw = false; bufp = false
		:: else -> skip
		fi;
		if
		:: c2holds && !lease && !ireply ->
			/* C1's lease never comes back: the run is decided */
			now = HORIZON
		:: else -> skip
		fi;
		fev = 0; l1stop = false; l2start = false; pd = 0; reconn = false; cdel = 0;
		i = 0; j = 0; x = 0;
		now++
		}
	od
}
