package zklock

import (
	"context"

	"github.com/zkrecipes/zklock/internal/session"
)

// The handoff by grant: a waiter learns that it holds from its
// predecessor's release itself, in one network delay, with no read of the
// queue after it.
//
// Who takes part. A participant of one node on one path whose policy holds
// exactly when its node is first and otherwise watches its immediate
// predecessor ([policy].handsOff: zklock's Mutex, the write side of
// RWMutex, Election). Every other participant waits and releases as
// before, and so do Curator's and kazoo's on the same path.
//
// The grant of a node X is a path next to it, grantName(X), that never
// exists outside one multi-operation: whoever fires it creates and deletes
// it in one transaction ([session.Door.HandOff], [session.Door.Fire]). A
// read of the path never lists it (ZooKeeper applies a multi as one
// transaction, and its CommitProcessor never runs a read while a write is
// applied), so no participant of any library ever counts it, and nothing of
// it is left behind. What it does is fire the exists watches on it,
// NodeCreated (DataTree.createNode triggers the path's data watches, which
// exists on a missing node sets; a multi's sub-transactions are applied in
// order by DataTree.processTxn, each triggering its own watches).
//
// The waiter S whose predecessor is X sets three watches, pipelined: an
// exists watch on X's grant, a getData watch on X (as any waiter) and one
// on its own node (which the lease then keeps as its cover, held.go).
//
//   - X's holder releases with one multi: create X's grant, delete X,
//     delete the grant. S is told NodeCreated on the grant, then
//     NodeDeleted on X, in that order (one session's notifications come in
//     zxid order, and a multi's in the order of its operations).
//   - S, told of the grant, in the connection it set its watches on, holds,
//     unless its own node's watch fired first. It takes its token from
//     the grant's notification, or reads it (see the paragraph on tokens
//     below, and [participant.granted]).
//   - S, told that X is gone with no grant before it (X gave up, its
//     session ended, or it is another library's), reads the queue as any
//     waiter does. Its exists watch on X's grant would never fire, so S
//     fires it itself ([participant.disarm]) before it watches another
//     predecessor's grant or holds, or as it deletes its node if it gives
//     up (session.Job.Grant), so that no watch is left behind.
//
// Why one holder. A grant of X fires in one of two ways:
//
//   - by X's holder, in the transaction that deletes X: X held, so it was
//     first, and nothing ever queues ahead of a node (ZooKeeper names a
//     sequential node after its parent's cversion at the leader's
//     PrepRequestProcessor, and zklock orders by it); so the node right
//     behind X is then first, and holds;
//   - by a waiter S whose predecessor was X, in a transaction that checks
//     or deletes S's own node: S's node exists then.
//
// Who is told: a session with an exists watch on X's grant, set by a waiter
// whose read listed X right ahead of its node. Take a live waiter V told of
// the grant, whose own node's watch has not fired; V's node existed at the
// grant's zxid (a deletion of it, earlier, would have been told to V first,
// since its session's notifications come in zxid order, and go-zookeeper
// hands each to its channel before it reads the next). In the first case,
// V's node was right behind X (nothing between them on V's read, and
// nothing ever queues between): V is first. In the second, V is S: any other
// live V would have S's node between X and V on its read (S's node was made
// before V's read, if V is behind S, and lives until the grant), or V is
// ahead of S, and then S's read would have listed V (V's node lived from
// before S's read to the grant) between X and S. S ignores its own grant
// (it no longer waits on it). A waiter whose connection changed since it
// set its watches does not hold on a grant; it reads, as on any change of
// the session's state. model/handoff.pml checks this in spin, with the
// broken variants (no check of the own node's watch; a fire with no check
// of the firer's node) refuted.
//
// The fencing token is the zxid of the multi that fired the grant, which
// ZooKeeper 3.9 sends in the notification's header (ZOOKEEPER-4655), so
// that the handoff costs no request after the release. ZooKeeper 3.8 sends
// -1 there, and the lease reads the lock path's pzxid when its token is
// first asked for, while its node is still there (session.Hold.Token), or
// at the grant if its lock's tokens were asked for before
// ([participant.granted]; then the lock stops taking part while its queue
// is short: [participant.handsOff]). The multi deleted X, so that is at
// least the multi's zxid. Either is above X's token (X's token was of a
// state before X's release), and S's next holder's token is at least the
// zxid of S's own release or deletion, which comes after. Tokens still
// strictly increase across holders (docs/design.md, "Tokens").

// grantName is the name of the grant of the node named (or at the path)
// name: its sequence (the last ten characters), between "_g_" and "_", so
// that even if it were ever listed, no library would count it (Curator
// sorts a name with no lock name in it whole, "_" after every digit, so
// behind every participant; kazoo matches its own names only; zklock, and
// go-zookeeper's zk.Lock, read only names that end in a sequence).
func grantName(name string) string {
	return "_g_" + name[len(name)-seqLen:] + "_"
}

// handsOff reports whether p takes part in the handoff: one node on one
// path of a queue, under a policy that hands off ([policy].handsOff),
// unless its lock's tokens are asked for, grants come without their zxid
// (ZooKeeper before 3.9: [participant.zxidless]) and its last read of the
// queue listed fewer than deepQueue nodes. A grant is then followed by a
// read of the token, a round trip as long as the read of the queue that
// decides a waiter and gives its token together: in a short queue, the
// grant's watches and its multi would cost requests and save no time (on
// loopback, 7 requests an acquisition instead of 5). In a deep one, the
// read of the token (the path's stat) is what the grant saves against a
// read of every node's name, at each handoff. Taking part or not is each
// participant's own choice, safe either way: a waiter whose predecessor
// releases with a plain delete reads the queue, and a grant nobody
// watches tells nobody anything (the proof above).
func (p *participant) handsOff() bool {
	if p.claim != claim(&p.queue) || len(p.ws) != 1 || len(p.ws[0].nodes) != 1 {
		return false
	}
	w := p.ws[0]
	return w.l.pol.handsOff() && !(w.l.tokens.Load() && p.zxidless() && !w.deep)
}

// deepQueue is the number of nodes from which a lock whose tokens are
// asked for hands off on ZooKeeper 3.8 ([participant.handsOff]). Measured
// (docs/bench/README.md, "Where a short queue ends"): W2 with a queue of 8
// to 128 runs level whether every wake reads the queue or is granted (the
// grant costs 2 requests more an acquisition); from 256 the grant is
// faster. Below 128 the rate does not choose; 32 bounds what a wake reads
// to about 2 KB of names, so that the bytes of a handoff do not grow with
// the queue. Either side is safe.
const deepQueue = 32

// zxidless reports that grants come without their zxid: as the wire's
// notifications showed it (none carried one: [session.Session.NotificationZxids]),
// or, before it read one or on a
// connection with no wire (internal/zkfake's), as the Client's latest grant
// came. Every participant of a Client learns it from the wire at once; a
// Client that learnt it from grants alone would never learn it while the
// others release without one.
func (p *participant) zxidless() bool {
	if carries, known := p.c.s.NotificationZxids(); known {
		return !carries
	}
	return p.c.zxidless.Load()
}

// handoffPred returns the predecessor a handoff waiter waits on, if w's
// wait is a handoff's: p hands off, and the plan watches one node and
// follows nothing else.
func (p *participant) handoffPred(pl watchPlan) (string, bool) {
	if !p.handsOff() || len(pl.paths) != 1 || pl.awaitHold || pl.marks != nil {
		return "", false
	}
	return pl.paths[0], true
}

// waitGrant is the wait of a handoff waiter on pred: it sets its watches
// and sleeps until its predecessor grants it the lock (it then holds, see
// [participant.granted]), anything else that concerns it happens (read
// again), or ctx is done.
func (p *participant) waitGrant(ctx context.Context, w *waiter, st session.Snapshot, pred string) error {
	predCh, done, err := p.arm(w, st.Epoch, pred)
	if done || err != nil {
		return err
	}
	return p.sleep(ctx, w, st, p.gone, predCh, nil)
}

// arm sets the three watches of a handoff wait, pipelined: our own node's
// (once per epoch), pred's grant's (once per predecessor; a grant watch
// left for an earlier one is fired first) and pred's. done: decide again
// now (pred is gone already, or the session needs sorting out).
func (p *participant) arm(w *waiter, epoch uint64, pred string) (<-chan session.Event, bool, error) {
	if w.armedFor != pred {
		if err := p.disarm(w); err != nil || w.armed != "" {
			return nil, true, err // not fired yet: read again, and try again, rather than forget it
		}
	}
	own := background(w.own == nil || w.ownAt != epoch, func() error {
		_, err := p.watchOwn(w, epoch)
		return err
	})
	armed := background(w.armedFor != pred, func() error { return p.watchGrant(w, pred) })
	_, predCh, err := p.c.s.Conn().GetW(pred)
	for _, ch := range []chan error{own, armed} {
		if e := joined(ch); err == nil || e == errRequeue {
			err = e // errRequeue (our node went with another session) comes first
		}
	}
	switch {
	case err == errRequeue:
		return nil, true, err
	case p.c.s.Classify(err) == session.Done:
		return predCh, false, nil
	case p.c.s.Classify(err) == session.Permanent:
		return nil, true, err
	}
	return nil, true, nil // pred gone already, or the loop sorts out the session
}

// watchGrant sets the exists watch on pred's grant.
func (p *participant) watchGrant(w *waiter, pred string) error {
	grant := w.l.path + "/" + grantName(pred)
	_, ch, err := p.c.s.Conn().ExistsW(grant)
	if err == nil {
		w.armed, w.armedFor, w.grant = grant, pred, ch
	}
	return err
}

// background runs f in a goroutine if run, and returns the channel of its
// error (nil if not run).
func background(run bool, f func() error) chan error {
	if !run {
		return nil
	}
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// joined waits for the error of a background run, nil if none was run.
func joined(ch chan error) error {
	if ch == nil {
		return nil
	}
	return <-ch
}

// granted acts on the event of w's grant watch: NodeCreated, in the
// connection of st, is the grant, and w holds; anything else (the watch
// ended with the connection) is read again. The own node's watch is
// checked by the grant ([participant.quiet]); the token is the grant's
// zxid if the notification carried it, else read later (see the top of
// this file).
func (p *participant) granted(w *waiter, st session.Snapshot, ev session.Event) error {
	if p.registers() {
		return p.entryHeard(w, st, ev) // the registry's entry watch (registry.go)
	}
	grant := w.armed
	w.armed, w.armedFor, w.grant = "", "", nil
	if !session.Created(ev) {
		return nil
	}
	select {
	case <-st.Changed:
		return nil
	default:
	}
	// The multi's own zxid, from ZooKeeper 3.9 on; else, if the lock's
	// tokens are asked for, the path's pzxid now (our own node's watch,
	// checked at the grant, proves the node was there at this read's
	// state); else, or if that read fails, the lease reads it when first
	// asked (session.Hold.Token).
	token := p.c.s.CreatedZxid(grant)
	// What a Client with no wire knows ([participant.zxidless]).
	p.c.zxidless.Store(token <= 0)
	if token <= 0 && w.l.tokens.Load() {
		// A read that fails returns the zero Stat: its Pzxid, 0, leaves
		// the lease to read its token when asked.
		_, s, _ := p.c.s.Conn().Get(w.l.path)
		token = s.Pzxid
	}
	w.token, w.alone = max(token, 0), false
	w.hold(st.Epoch, false)
	return nil
}

// disarm fires w's grant watch for a predecessor gone with no grant (or
// left for another), so that no watch of ours is left on the server: in
// one multi with a check that our node exists (the proof at the top of this
// file needs it there). If our node is gone, we queue again (and the
// watch stays until the session ends: nobody else may fire it); any other
// failure leaves it armed, to try again on the next read or as we go.
func (p *participant) disarm(w *waiter) error {
	if w.armed == "" {
		return nil
	}
	own := w.nodes[len(w.nodes)-1]
	err := p.c.s.Conn().Fire(own, w.armed, p.c.s.ACL)
	switch {
	case err == nil:
		// Fired only if our own watch heard it (a notification comes
		// before the reply): after a reconnect, go-zookeeper sets its
		// watches again with a request of its own, which a fire can
		// overtake; then the watch is set after it, and must be fired
		// again later.
		if session.Heard(w.grant) {
			w.armed, w.armedFor, w.grant = "", "", nil
		}
	case session.GoneAt(err, own):
		return errRequeue
	}
	return nil
}

// disarmHeld fires, before w's nodes are granted, a grant watch still
// armed (a fire that failed on an earlier try): the lease cannot fire it
// later. It is safe then as on any read (our node is checked in the same
// transaction). ready: nothing is left armed; if a fire failed again, the
// grant waits (the loop decides again once the connection is back), and a
// node of ours found gone queues again.
func (p *participant) disarmHeld() (ready bool, err error) {
	for _, w := range p.ws {
		if err := p.disarm(w); err != nil {
			return false, err
		}
		if w.armed != "" {
			return false, nil
		}
	}
	return true, nil
}

// handoffs names, for a participant that hands off, the grant its lease
// fires as it releases: it holds, so its node is first ([Hold] in
// internal/session says why that makes the grant safe).
func (p *participant) handoffs() []string {
	if !p.handsOff() {
		return nil
	}
	w := p.ws[0]
	return []string{w.l.path + "/" + grantName(w.nodes[0])}
}

// tokenPath is the lock path whose pzxid is the lease's token, read on its
// first use, when the grant's notification did not carry the token: ""
// otherwise (session.Hold.Token).
func (p *participant) tokenPath() string {
	if len(p.ws) == 1 && p.ws[0].held && p.ws[0].token == 0 {
		return p.ws[0].l.path
	}
	return ""
}

// alone reports that every read that decided we hold listed nobody behind
// us ([session.Grant].Alone).
func (p *participant) alone() bool {
	for _, w := range p.ws {
		if !w.alone {
			return false
		}
	}
	return true
}
