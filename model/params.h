/*
 * The constants of the lease-deadline model, in one place: model/lease.pml
 * includes this file, and internal/session/model_test.go reads it and
 * checks them against the code, so that a change in the code that the
 * model does not follow fails `go test`.
 *
 * Time is discrete. One unit is T/24 of the granted session timeout T,
 * small enough that T/3, T/4, T/12 and two ticks are whole units, and large
 * enough to keep the state space small. Where the code's fraction is not a
 * whole number of units, the model rounds the way that makes the deadline
 * later (T/20 = 1.2 units: the margin is 1 unit). Every value can be
 * overridden with -D, which is how model/run.sh builds the variants.
 *
 * Lines are `#define NAME value` with an integer value; the Go test parses
 * them, so keep that form.
 */

/* T: the session timeout the server granted (wire.sessionTimeout). */
#ifndef T
#define T 24
#endif
/* T/3: how far before a confirmed write's send time its anchor w lies
 * (Session.Confirm: sentBy(sent - t/3)); the confirmation period
 * (nextConfirmation: confirmed + t/3); the stall after which the keeper
 * drops the connection (keeper.confirm: time.NewTimer(t / 3)). */
#ifndef THIRD
#define THIRD 8
#endif
/* T/4: what nextConfirmation leaves for the answer (deadline - t/4). */
#ifndef QUARTER
#define QUARTER 6
#endif
/* T - horizon(T): what the deadline keeps in hand (horizon: t - t/20). */
#ifndef MARGIN
#define MARGIN 1
#endif
/* T/12: the keeper's pause after a failed confirmation (retryAt). */
#ifndef RETRY
#define RETRY 2
#endif
/* go-zookeeper v1.0.4 (conn.go setTimeouts): recvTimeout = T*2/3, and
 * sendLoop pings every pingInterval = recvTimeout/2. */
#ifndef RECV
#define RECV 16
#endif
#ifndef CPING
#define CPING 8
#endif
/* tickTime. T = 2 ticks: minSessionTimeout's default, the longest tick a
 * granted T allows, and so the slowest relay of touches. */
#ifndef TICK
#define TICK 12
#endif
/* The leader pings every learner every tick/2 (Leader.lead). */
#ifndef LPING
#define LPING 6
#endif
/* syncLimit, in ticks. ZooKeeper's sample config has 5; 2 keeps runs
 * short, and the bound does not depend on it (docs/model.md). */
#ifndef SYNCLIMIT
#define SYNCLIMIT 2
#endif
/* The longest a leader's ping takes to reach the follower: T/12, the
 * design's assumption (docs/design.md, "Assumptions"). */
#ifndef PDELAY
#define PDELAY 2
#endif
/* The longest a packet of the client takes to reach its server. */
#ifndef CDELAY
#define CDELAY 0
#endif
/* How much sooner than the client's clock the leader's clock says T has
 * passed: the servers' clocks run fast by up to T/20 (1 unit). */
#ifndef DRIFT
#define DRIFT 1
#endif
/* Faults start (and heal) at any time up to FAULTEND (two periods of the
 * client's schedule after its start); the run ends at HORIZON, where
 * someone must hold; at most MAXFAULTS faults per run (run.sh also runs
 * two, in a shorter window). HORIZON must be at least FAULTEND +
 * (SYNCLIMIT+1)*TICK + T + TICK (120 here): a replaced leader's successor
 * may start that late, and expire the session T and a tick after. */
#ifndef FAULTEND
#define FAULTEND 48
#endif
#ifndef HORIZON
#define HORIZON 120
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 1
#endif
/* The phases the leader's pings may have (their start, modulo LPING).
 * With every phase of the expiry buckets (0..TICK-1) tried, phases 0 and 1
 * stand for all six: shifting time by one period of the client's schedule
 * (8 units) moves the buckets' phase by 4 and the pings' by 2, so each
 * combination is, up to such a shift, one with the pings' phase 0 or 1. */
#ifndef LPHASES
#define LPHASES 2
#endif
/* The phases the leader's expiry buckets may have: every one. */
#ifndef GPHASES
#define GPHASES TICK
#endif
