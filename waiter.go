package zklock

import (
	"context"
	"reflect"

	"github.com/zkrecipes/zklock/internal/session"
)

// waiter is a participant's place on one path: read the queue, ask the
// driver, watch what it names, wait; the same for every recipe and for
// every path of a MultiLock.
type waiter struct {
	l *Lock
	// guard: keep a watch on our last node while the participant decides
	// its other paths, so that the grant knows it is still there ([participant.quiet]).
	// Set for a participant on several paths; on one path the read that
	// decides is the last one before the grant.
	guard bool

	nodes    []string             // full paths, once known
	own      <-chan session.Event // a watch on our last node (guard, or a place); nil until set
	ownAt    uint64               // the Client's epoch when own was set
	token    int64                // the path's pzxid when the read that decided we hold was made ([participant.token])
	pre      <-chan fetched       // the first look, read while the create was on its way
	looked   bool                 // the first look was made
	seen     seenVersion          // the last version of an awaited node we decided on
	counted  sizeVersion          // the version of the policy's live size we decided on
	path     []byte               // the lock path's data, once a decision asked for it ([participant.decideIn])...
	pathRead bool                 // ...here
	held     bool                 // decided to hold...
	heldAt   uint64               // ...in this epoch
	announce bool                 // on the grant, tell successors waiting with awaitHold
	marked   bool                 // our last node may carry the held-back mark (heldback.go)...
	markedAt int32                // ...and its data version once our last mark left it there
	look     session.Look         // the first look's children watch, while it may cover our nodes (look.go)

	// A handoff's (handoff.go): the grant whose exists watch we set, for
	// which predecessor, and the watch.
	armed, armedFor string
	grant           <-chan session.Event
	alone           bool // the read that decided we hold listed nobody behind us
	deep            bool // our last read of the queue listed deepQueue nodes or more ([participant.handsOff])

	// The registry's (registry.go): whether every live node ahead is known
	// to be registered, the entry of the predecessor whose hold we await,
	// the registry's children watch of a chained wait, and our marker.
	chained    bool
	regPred    string
	regWatch   <-chan session.Event
	marker     string // our marker's path, if our first look asked for one...
	markerMade bool   // ...and it is known made
}

// reset forgets the nodes of an abandoned attempt.
func (w *waiter) reset() {
	w.look.End()
	*w = waiter{l: w.l, guard: w.guard}
}

// seenVersion is a node's data version, as a waiter with awaitHold saw it.
type seenVersion struct {
	path    string
	version int32
}

func (w *waiter) hold(epoch uint64, announce bool) {
	w.held, w.heldAt, w.announce = true, epoch, announce
}

// view is a participant's place in one path's queue, as one read showed it.
type view struct {
	kids        []Child
	first, last int
	d           decision
	seen        map[string]int32 // the data versions of the nodes whose marks decided, by path ([participant.readMarks])
	fromReg     bool             // decided from the registry (registry.go): no kids...
	reg         bool             // ...and, not holding, waits for the registry's children
}

// surveyQueue reads w's queue and decides, and gets what the decision
// needs before acting on it: a holder's token, from the read itself
// ([participant.token]); for a guarded waiter, whose grant checks every
// path, a watch on our own node. A waiter in the semaphore's registry
// reads that first, and, chained, decides from it (registry.go).
func (p *participant) surveyQueue(w *waiter, epoch uint64) (v view, err error) {
	if w.guard && w.ownAt != epoch {
		w.own = nil // read sets a watch on our node again, in this epoch
	}
	first := !w.looked
	var reg registry
	if p.registers() && !first && w.chained {
		// Chained: decided from the registry if it can (registry.go).
		if v, reg, err = p.surveyRegistry(w); v.fromReg || err != nil {
			return v, err
		}
	}
	var ps session.ParentStat
	switch {
	case first:
		v.kids, ps, err = p.look(w)
	case p.registers():
		v.kids, ps, reg, err = p.readWithRegistry(w, epoch)
	default:
		v.kids, ps, err = p.read(w, epoch)
	}
	if err != nil {
		return v, err
	}
	w.deep = len(v.kids) >= deepQueue
	if v, err = p.decideOn(w, v, reg, first); err != nil {
		return v, err
	}
	if v.d.Holds {
		w.token, w.alone = ps.Pzxid, v.last == len(v.kids)-1
	}
	if w.own == nil && w.guard {
		_, err := p.watchOwn(w, epoch)
		return v, err
	}
	return v, nil
}

// decideOn decides for w on v.kids, a read of its queue (made after reg,
// if reg was read).
func (p *participant) decideOn(w *waiter, v view, reg registry, first bool) (view, error) {
	var ok bool
	if v.first, v.last, ok = p.locate(w, v.kids); !ok {
		return v, errRequeue
	}
	var err error
	if v.d, v.seen, err = p.decideIn(w, v); err != nil {
		return v, err
	}
	if p.registers() {
		if err := p.afterRead(w, v, reg, first); err != nil {
			return v, err
		}
	}
	if first {
		w.l.queued.Store(!v.d.Holds) // how the next first look is sent ([participant.startLooks])
	}
	return v, nil
}

// decideIn asks w's policy about our place in v, makes the reads it asks
// for, if any, and asks again with their answers, then refuses a decision
// the engine cannot act on. It returns too the data versions of the marks
// read, by path, for the wait ([participant.readMarks]).
//
// The path's data (a zklock semaphore's legacy size, asked for when a
// node ahead carries no size in its id: [semaphorePolicy]) is read once
// per attempt: only the nodes that were ahead at our first look can ever
// be ahead of us (ZooKeeper appends every later create behind ours), so
// one read serves every decision. The marks are read after
// v's read, on its session, every time they are asked for: the count's
// proof needs that order ([participant.readMarks]).
func (p *participant) decideIn(w *waiter, v view) (decision, map[string]int32, error) {
	q := question{kids: v.kids, first: v.first, last: v.last, path: w.path, pathRead: w.pathRead}
	var seen map[string]int32
	d := w.l.pol.decide(q)
	for d.open(q) {
		if err := p.answer(w, &q, d.reads, &seen); err != nil {
			return decision{}, nil, err
		}
		d = w.l.pol.decide(q)
	}
	return d, seen, w.check(d, v.first)
}

// answer makes one of the reads r that q has not answered, into q (and the
// marks' versions into *seen).
func (p *participant) answer(w *waiter, q *question, r reads, seen *map[string]int32) error {
	if r.path && !q.pathRead {
		data, _, err := p.c.s.Conn().Get(w.l.path)
		if err != nil {
			return err
		}
		w.path, w.pathRead = data, true
		q.path, q.pathRead = data, true
		return nil // the marks, if still asked for, after the policy has seen it
	}
	marks, versions, err := p.readMarks(w, q.kids, r.marks)
	if err != nil {
		return err
	}
	q.marks, q.marksRead, *seen = marks, true, versions
	return nil
}

// check refuses a decision the engine cannot act on: a driver bug must
// fail the acquire, never hang it or panic.
func (w *waiter) check(d decision, first int) error {
	if d.Holds {
		return nil
	}
	if len(d.Watch) == 0 && len(d.behind) == 0 && w.l.pol.live() == nil { // a live size's change is watched too
		return invalidf("%v neither holds nor names a node to watch", w.l.pol)
	}
	for _, i := range d.Watch {
		if i < 0 || i >= first {
			return invalidf("%v watches child %d, not one ahead of the participant's first node %d", w.l.pol, i, first)
		}
	}
	return nil
}

// locate finds our nodes in kids; ok is false if any is missing.
func (p *participant) locate(w *waiter, kids []Child) (first, last int, ok bool) {
	first, found := -1, 0
	for i, k := range kids {
		if k.Owner == p.id {
			if first < 0 {
				first = i
			}
			last = i
			found++
		}
	}
	return first, last, first >= 0 && found == len(w.nodes)
}

// dropStrays removes from kids any node with our protected id that is not
// one of ours: a create retried after a lost reply can, rarely, leave one.
// It is ours (only we know the id), so we delete it.
func (p *participant) dropStrays(w *waiter, kids []Child) []Child {
	var strays []string
	out := kids[:0]
	for _, k := range kids {
		if k.Owner == p.id && !w.owns(k.Name) {
			strays = append(strays, k.Name)
			continue
		}
		out = append(out, k)
	}
	p.discardNames(w.l, strays)
	return out
}

func (w *waiter) owns(name string) bool {
	for _, n := range w.nodes {
		if n[len(w.l.path)+1:] == name {
			return true
		}
	}
	return false
}

// watchOwn reads our last node on w's path with a watch: its owner proves
// it is ours, the watch tells a guarded waiter if someone deletes it (see
// [participant.quiet]), and a place takes its token from its czxid.
func (p *participant) watchOwn(w *waiter, epoch uint64) (session.Stat, error) {
	st, own, err := p.c.s.Conn().GetW(w.nodes[len(w.nodes)-1])
	if err != nil {
		return st, err
	}
	if st.EphemeralOwner != p.session {
		// Never count a node of another session; if it is the current
		// one's, it must not stay in the queue either.
		p.c.s.Discard(session.Job{Nodes: w.nodes, Session: st.EphemeralOwner})
		w.nodes = nil
		return st, errRequeue
	}
	w.own, w.ownAt = own, epoch
	return st, nil
}

// watchPlan is what a waiter keeps while it sleeps: only the paths it
// watches. The children snapshot itself is dropped, so a waiter costs
// little memory.
type watchPlan struct {
	paths     []string
	awaitHold bool
	// marks: for the nodes whose marks a held-back waiter's decision read,
	// by path, the data version read, and for our own node the version
	// our mark left; a node found at another when its watch is set has
	// changed its mark since.
	marks map[string]int32
	// reg: a chained waiter's watch on the registry's children (registry.go).
	reg <-chan session.Event
}

// plan prepares the wait.
func (w *waiter) plan(v view) watchPlan {
	d := v.d
	pl := watchPlan{paths: make([]string, len(d.Watch)), awaitHold: d.awaitHold}
	for i, idx := range d.Watch {
		pl.paths[i] = w.l.path + "/" + v.kids[idx].Name
	}
	for _, idx := range d.behind {
		pl.paths = append(pl.paths, w.l.path+"/"+v.kids[idx].Name)
	}
	pl.marks = v.seen
	if v.reg {
		pl.reg = w.regWatch
	}
	if len(d.behind) > 0 {
		// Held back: our own node too, whose mark a Revoke may replace
		// (then we mark it again: [participant.mark]), and may have
		// replaced already when the watch is set: found at another
		// version than our mark left, it is decided on again.
		own := w.nodes[len(w.nodes)-1]
		pl.paths = append(pl.paths, own)
		if pl.marks == nil {
			pl.marks = map[string]int32{}
		}
		pl.marks[own] = w.markedAt
	}
	return pl
}

// wait sets the watches of plan and sleeps until one fires, our own node
// on w's path changes (a guarded waiter) or is found gone (the keeper's
// check), the session state changes or ctx is done. Then the loop reads
// again: a waiter takes the lock only on a read, whose pzxid is its token
// ([participant.token]), never on a notification alone.
func (p *participant) wait(ctx context.Context, w *waiter, st session.Snapshot, pl watchPlan) error {
	if pred, ok := p.handoffPred(pl); ok {
		return p.waitGrant(ctx, w, st, pred)
	}
	if pl.reg != nil {
		return p.sleep(ctx, w, st, p.gone, pl.reg, nil)
	}
	if p.registers() {
		if done, err := p.armEntry(w); done || err != nil {
			return err
		}
	}
	var buf [1]<-chan session.Event // the usual wait: no allocation
	watches, done, err := p.watchAhead(w, pl, buf[:0])
	if done || err != nil {
		return err
	}
	var counted <-chan session.Event
	if live := w.l.pol.live(); live != nil {
		ch, again, err := live.watch(p.c.s.Conn(), &w.counted)
		if again || err != nil {
			return err // decide again with the count just read
		}
		counted = ch
	}
	gone := p.gone
	if w.guard {
		// Its own nodes' watches tell, and the grant checks them all
		// (quiet): a node on a path decided already is found then.
		gone = nil
	}
	if len(watches) == 1 {
		return p.sleep(ctx, w, st, gone, watches[0], counted)
	}
	return waitAny(ctx, w, st, gone, counted, watches)
}

// watchAhead sets a watch on each node of pl. done: no need to wait,
// decide again now (a node is gone already, or announced its hold before
// we watched it, or the session needs sorting out).
func (p *participant) watchAhead(w *waiter, pl watchPlan, watches []<-chan session.Event) (_ []<-chan session.Event, done bool, err error) {
	zc := p.c.s.Conn()
	for _, path := range pl.paths {
		s, ch, err := zc.GetW(path)
		switch p.c.s.Classify(err) {
		case session.Done:
			if version, read := pl.marks[path]; read && s.Version != version {
				return nil, true, nil // its mark changed since we read it: decide again
			}
			if pl.awaitHold && s.Version != 0 && w.seen != (seenVersion{path, s.Version}) {
				// It announced before we watched (or someone wrote to it:
				// deciding again tells). A version decided on once is not
				// news: then wait for the next change.
				w.seen = seenVersion{path, s.Version}
				return nil, true, nil
			}
			watches = append(watches, ch)
		case session.Permanent:
			return nil, true, err
		default:
			return nil, true, nil // gone already, or the loop sorts out the session
		}
	}
	return watches, false, nil
}

// sleep is the usual wait, on one node ahead: a plain select, which the
// waiter wakes from on every handoff (reflect.Select allocates). A
// handoff's waiter hears its grant too (w.grant; nil for others, which
// never fires): told the node ahead changed, it looks for the grant first,
// which came first if there was one (handoff.go).
func (p *participant) sleep(ctx context.Context, w *waiter, st session.Snapshot, gone <-chan struct{}, ahead, counted <-chan session.Event) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-st.Changed:
	case ev := <-w.own:
		return w.ownChanged(ev)
	case <-gone:
		return errRequeue
	case ev := <-w.grant:
		return p.granted(w, st, ev)
	case <-ahead:
		select {
		case ev := <-w.grant:
			return p.granted(w, st, ev)
		default:
		}
	case <-counted: // the count changed: decide again
	}
	return nil
}

// waitAny is wait's select over any number of watches.
func waitAny(ctx context.Context, w *waiter, st session.Snapshot, gone <-chan struct{}, counted <-chan session.Event, watches []<-chan session.Event) error {
	cases := make([]reflect.SelectCase, 0, len(watches)+5)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.Changed)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.own)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(gone)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(counted)})
	for _, ch := range watches {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, v, _ := reflect.Select(cases)
	switch chosen {
	case 0:
		return ctx.Err()
	case 2:
		ev, _ := v.Interface().(session.Event)
		return w.ownChanged(ev)
	case 3:
		return errRequeue
	}
	return nil // a watched node or the count changed, or the session's state: decide again
}

// ownChanged handles our own node's watch: deleted means queue again;
// anything else (a data change, the session's end) means read again.
func (w *waiter) ownChanged(ev session.Event) error {
	w.own = nil
	if session.Deleted(ev) {
		return errRequeue
	}
	return nil
}
