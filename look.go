package zklock

import "github.com/zkrecipes/zklock/internal/session"

// Reading a queue: a waiter's first look, sent right behind the create,
// and the reads it makes on waking.

// look is a waiter's first read: the children of the lock path, in queue
// order, and the path's stat, pipelined with the read of a live size (a
// Curator-layout semaphore's SharedCount: [policy].live). Whoever holds on it at once takes
// its token from the stat ([participant.token]) and needs no other
// request. It uses the read that [participant.prefetch] made while the
// create was on its way if that read shows our nodes, and reads again
// otherwise. Only a look that succeeds counts: after one that failed (the
// connection closed under it), the next survey looks again rather than
// read, since a read does not read the count, and a participant deciding
// with its seed rather than the count may grant more leases than the
// count allows.
func (p *participant) look(w *waiter) ([]Child, session.ParentStat, error) {
	kids, ps, ok := p.prefetched(w)
	if !ok {
		names, s, err := w.l.fetch(p.c.s.Conn(), w.look.Active())
		if err != nil {
			return nil, s, err // not looked: the next survey looks again, and reads the count
		}
		if kids, err = p.parse(w, names); err != nil {
			return nil, s, err
		}
		ps = s
	}
	w.looked = true
	if first, _, ok := p.locate(w, kids); ok && first > p.ahead {
		p.ahead = first
	}
	return kids, ps, nil
}

// prefetched returns the prefetched look, if there is one and it lists our
// nodes.
func (p *participant) prefetched(w *waiter) ([]Child, session.ParentStat, bool) {
	if w.pre == nil {
		return nil, session.ParentStat{}, false
	}
	f := <-w.pre
	w.pre = nil
	if f.err != nil {
		return nil, session.ParentStat{}, false
	}
	kids, err := p.parse(w, f.names)
	if err != nil {
		return nil, session.ParentStat{}, false
	}
	_, _, ok := p.locate(w, kids)
	return kids, f.ps, ok
}

// fetched is what a look reads.
type fetched struct {
	names []string
	ps    session.ParentStat
	err   error
}

// fetch reads the children and stat of the lock path, with a children
// watch if watch is set, and, for a policy that follows a live size (a
// SharedCount), the size, in parallel.
func (l *Lock) fetch(zc session.Conn, watch bool) ([]string, session.ParentStat, error) {
	var sized chan error
	if live := l.pol.live(); live != nil {
		sized = make(chan error, 1)
		go func() { sized <- live.check(zc) }()
	}
	read := zc.ChildrenStat
	if watch {
		read = zc.ChildrenStatW
	}
	names, ps, err := read(l.path)
	if sized != nil {
		if serr := <-sized; err == nil {
			err = serr
		}
	}
	return names, ps, err
}

// parse sorts the names of a read and drops strays of ours.
func (p *participant) parse(w *waiter, names []string) ([]Child, error) {
	kids, err := sortChildren(names, w.l.pol.refuses)
	if err != nil {
		return nil, err
	}
	return p.dropStrays(w, kids), nil
}

// prefetch starts the first look of every path as soon as the create of
// our nodes (the request carrying marker) has gone out on zc, so that its
// answer comes a moment after the create's rather than a round trip
// later. cancel stops it if the create did not succeed.
//
// Why the look can be trusted: ZooKeeper answers a session's requests in
// the order it sent them, a read after the session's write only once that
// write is applied (CommitProcessor keeps a session's reads behind its
// pending writes), so a read sent after the create on the same connection
// sees our nodes. A read that went out on another connection (the first
// dropped in between) may not; [participant.look] uses the prefetched read
// only if it lists our nodes by name, which no read made before the create
// can, and reads again otherwise.
func (p *participant) prefetch(zc session.Conn, marker string) ([]<-chan fetched, func()) {
	pres := make([]<-chan fetched, len(p.ws))
	if !p.claim.queues() {
		return pres, func() {}
	}
	sent, stop := p.c.s.Sent(marker)
	quit := make(chan struct{})
	for i, w := range p.ws {
		out := make(chan fetched, 1)
		pres[i] = out
		go func(l *Lock, watch bool) {
			select {
			case <-sent:
			case <-quit: // the create failed: nobody reads out
				return
			}
			var f fetched
			f.names, f.ps, f.err = l.fetch(zc, watch)
			out <- f
		}(w.l, w.look.Active())
	}
	return pres, func() { stop(); close(quit) }
}

// read gets the children of w's path, in queue order, and its stat: the
// read a waiter makes on waking. A guarded waiter also reads its own node
// with a watch ([participant.watchOwn]) when it has none, pipelined on the
// connection, so it costs no round trip. A SharedCount was read by the
// first look; a read does not read it again (the wait watches it).
//
// A waiter on one path keeps no watch on its own node: it never holds but
// on a read that lists it, and learns that someone deleted it from that
// read, on its next wake, or from the keeper, which checks waiters' nodes
// at least every third of the session timeout ([session.Session.Waiting]).
//
// It leaves no children watch: such a watch would fire at the next create
// or delete on the path, a notification to this session per handoff (with
// 8 clients on one mutex, 3.0 notifications per handoff instead of 2.0),
// and nothing waits for it. No exclusion depends on it: a waiter wakes on
// its predecessor's data watch and holds only on a read that lists no
// conflicting node ahead ([participant.token]). Its one use was to cover,
// at no request, a node this read finds holding. Without it the node is
// bare at the grant ([participant.covers] gives no look), so the Session
// hands it to the keeper for a data watch of its own once the lease is
// armAge old, as it does today when the next participant's create spends
// the children watch, which on a contended path comes within
// milliseconds. A node deleted before then ends its lease within armAge
// of the grant (the keeper's getData finds it gone), one deleted later at
// ZooKeeper's notice of its data watch. The cost: a getData for a lease
// held longer than armAge after a wait that nobody else's create or
// delete would have spent. TestDeletedHeldNodeEndsLease ("held after a
// wait") fails if such a node is not watched.
func (p *participant) read(w *waiter, epoch uint64) ([]Child, session.ParentStat, error) {
	w.look.End() // this read sets no watch that could cover our nodes
	zc := p.c.s.Conn()
	if w.own != nil || !w.guard {
		names, ps, err := zc.ChildrenStat(w.l.path)
		if err != nil {
			return nil, ps, err
		}
		kids, err := p.parse(w, names)
		return kids, ps, err
	}
	owned := make(chan error, 1)
	go func() {
		_, err := p.watchOwn(w, epoch)
		owned <- err
	}()
	names, ps, err := zc.ChildrenStat(w.l.path)
	if oerr := <-owned; oerr != nil {
		err = oerr // errRequeue (our node went with another session) comes first
	}
	if err != nil {
		return nil, ps, err
	}
	kids, err := p.parse(w, names)
	return kids, ps, err
}

// startLooks decides, for the first look of every waiter, whether it
// leaves a children watch, and records with the Session each that does,
// before it is sent: whether that watch is still pending at the grant is
// then known (see held.go). A place does not look.
//
// The watch serves one purpose: to cover, at no request, our nodes if this
// look finds them holding (a lease on a free lock, most leases). If the
// look finds us queued, it only costs a notification to this session at
// the next create or delete on the path. Which it will be is not known when
// it is sent (right behind the create), so it follows the lock's latest
// first look (Lock.queued): on a contended lock, where the looks find the
// participant queued, it is sent without one. Either way is safe: no
// exclusion or token depends on the watch (see [participant.read]), and a
// look without one that finds us holding leaves our nodes bare at the
// grant ([participant.covers]), so the keeper sets a data watch of their
// own once the lease is armAge old: a getData for a lease held that long,
// and a node deleted before then ends its lease within armAge of the
// grant. TestDeletedHeldNodeEndsLease ("held at once after a lock was
// contended") fails if such a node is not watched.
func (p *participant) startLooks() {
	if !p.claim.queues() {
		return
	}
	for _, w := range p.ws {
		w.look.End()
		if !w.l.queued.Load() {
			w.look = p.c.s.StartLook(w.l.path)
		}
	}
}

// covers says, for each of our nodes in the order of groups, what watch
// covers it: its own (the last node of a waiter, while its watch is set),
// or the children watch of the waiter's first look, if that look left one
// and no read came after it ([participant.startLooks],
// [participant.read]); otherwise none, and the Session hands the node to
// the keeper.
func (p *participant) covers() []session.Cover {
	var out []session.Cover
	for _, w := range p.ws {
		for i := range w.nodes {
			own := i == len(w.nodes)-1 && w.own != nil
			out = append(out, session.Cover{Own: own, Look: w.look})
		}
	}
	return out
}
