package zklock

import (
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// The semaphore's registry: how a waiter of a zklock semaphore decides,
// once it knows every live node ahead of it has registered, from the
// registry alone, O(K) bytes, rather than from a read of the whole queue,
// O(D). The protocol (REG_ALL) and its proof are in docs/design.md ("Why
// a semaphore's waiters still read the queue"), model-checked in
// model/registry.pml; the rules, where they are applied:
//
//   - The registry is `_holders`, a container child of the lock path with
//     no sequence suffix, which every zklock version's sortChildren drops.
//     Its children are entries `r_<seq>_<size>_` or `u_<seq>_<size>_` (a
//     holder's; seq its node's sequence) and markers `z_<seq>_<size>_`. No
//     name there ends in a sequence, so no reader of any library counts
//     one as a participant.
//   - A holder that waited, or whose deciding read listed a node behind it
//     (today's announce), registers at its grant, in one multi that
//     creates its entry and bumps its node's version ([participant.register]):
//     `r` if it was chained, else `u`. An entry goes with its node: in the
//     release's multi, or after it (session.Hold.Attach), never before.
//   - A waiter is chained once it knows every live node ahead of it had an
//     entry: its first look listed nothing ahead; it saw r(X) made, X its
//     immediate predecessor (an exists watch, [participant.armEntry]); or
//     a read of the queue listed only nodes that a read of the registry
//     made before it listed (an entry goes only with its node, and no node
//     ever joins ahead). Once true it stays true: every node that joins
//     ahead of nobody, and every node ahead registers before it goes or
//     goes with its entry.
//   - A chained waiter counts the entries ahead of it; every one is a
//     holder (entries are made at grants) and every live node ahead has
//     one. It holds if fewer than the smallest of its size and theirs are
//     ahead, unless a marker of a smaller size than its own exists: a node
//     of that size behind it may make the count refuse what the rule
//     allows (driver.go), and then it reads the queue
//     ([registry.decides]; TestRegistryRuleIsTheCountWithoutSmallerMarkers).
//   - A participant whose first look lists a larger size ahead of it makes
//     its marker, in a multi that checks its node ([participant.markSize]).

// registryName is the registry's name under the lock path.
const registryName = "_holders"

// The kinds of the registry's children.
const (
	entryChained   = 'r'
	entryUnchained = 'u'
	entryMarker    = 'z'
)

// regItem is one child of the registry.
type regItem struct {
	kind byte
	seq  int32
	size int
}

// itemName is the name of the registry child of kind for the node of
// sequence seq and size size.
func itemName(kind byte, seq int32, size int) string {
	return string(kind) + "_" + strconv.Itoa(int(seq)) + "_" + strconv.Itoa(size) + "_"
}

// parseItem reads a registry child's name; ok is false for any other name.
func parseItem(name string) (regItem, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 4 || len(parts[0]) != 1 || parts[3] != "" {
		return regItem{}, false
	}
	seq, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil {
		return regItem{}, false
	}
	size, err := strconv.Atoi(parts[2])
	if err != nil || size < 1 {
		return regItem{}, false
	}
	switch k := parts[0][0]; k {
	case entryChained, entryUnchained, entryMarker:
		return regItem{kind: k, seq: int32(seq), size: size}, true
	}
	return regItem{}, false
}

// registry is one read of the registry.
type registry struct {
	items []regItem
	read  bool // a read was made (a missing registry reads as empty)
}

// holds decides for a chained waiter of the node of sequence seq and of
// size size: decided is false if a marker of a smaller size exists (the
// queue decides then); else it holds if fewer entries are ahead of it than
// the smallest of its size and theirs (the rule; the count cannot refuse
// it then: TestRegistryRuleIsTheCountWithoutSmallerMarkers).
func (r registry) holds(seq int32, size int) (decided, holds bool) {
	n, m := 0, size
	for _, it := range r.items {
		switch {
		case it.kind == entryMarker:
			if it.size < size {
				return false, false
			}
		case seqBefore(it.seq, seq):
			n++
			m = min(m, it.size)
		}
	}
	return true, n < m
}

// has reports an entry for the node of sequence seq.
func (r registry) has(seq int32) bool {
	for _, it := range r.items {
		if it.kind != entryMarker && it.seq == seq {
			return true
		}
	}
	return false
}

// registers reports whether p takes part in the registry: one node on one
// path of a queue, under a policy that registers.
func (p *participant) registers() bool {
	return p.claim == claim(&p.queue) && len(p.ws) == 1 && len(p.ws[0].nodes) == 1 && p.ws[0].l.pol.registers() > 0
}

// nodeSeq is the sequence of the node at path (or named) name, ok false if
// it has none zklock reads.
func nodeSeq(name string) (int32, bool) {
	ch, ok, err := parseChild(name[strings.LastIndexByte(name, '/')+1:])
	return ch.seq, ok && err == nil
}

// readRegistry reads w's registry, with a children watch if watch is set
// (a chained waiter's wait: [waiter.regWatch]).
func (p *participant) readRegistry(w *waiter, watch bool) (registry, error) {
	zc := p.c.s.Conn()
	path := w.l.path + "/" + registryName
	var names []string
	var err error
	if watch {
		names, w.regWatch, err = zc.ChildrenW(path)
	} else {
		names, err = zc.Children(path)
	}
	switch p.c.s.Classify(err) {
	case session.Done:
	case session.Gone:
		return registry{read: true}, nil // no entries; nothing to watch (nothing holds ahead)
	default:
		return registry{}, err
	}
	r := registry{read: true, items: make([]regItem, 0, len(names))}
	for _, n := range names {
		if it, ok := parseItem(n); ok {
			r.items = append(r.items, it)
		}
	}
	return r, nil
}

// chainedBy reports whether a read of the queue whose nodes ahead of ours
// are ahead chains us, given a read of the registry made before it: every
// node ahead had an entry then (so has one now: an entry goes only with
// its node).
func chainedBy(ahead []Child, r registry) bool {
	if !r.read {
		return false
	}
	for _, k := range ahead {
		seq, ok := nodeSeq(k.Name)
		if !ok || !r.has(seq) {
			return false
		}
	}
	return true
}

// surveyRegistry decides for a chained waiter from the registry, and the
// lock path's stat read after it (its pzxid is the token, as a queue
// read's is: [participant.token]); v.fromReg says it decided. If a marker
// of a smaller size exists, it does not, and r, read before, serves the
// read of the queue that decides instead.
func (p *participant) surveyRegistry(w *waiter) (v view, r registry, err error) {
	if r, err = p.readRegistry(w, true); err != nil {
		return v, r, err
	}
	seq, _ := nodeSeq(w.nodes[0])
	decided, holds := r.holds(seq, w.l.pol.registers())
	if !decided {
		w.regWatch = nil // the queue decides, and its wait watches
		return v, r, nil
	}
	v.fromReg = true
	if !holds {
		v.reg = true // wait for the registry's children to change
		return v, r, nil
	}
	// The token: the path's pzxid from a read after the registry's, which
	// may wait until the lease's token is first asked for (its lease reads
	// it then, while its node is still there: session.Hold.Token), unless
	// the lock's tokens are asked for already (then a read now, one round
	// trip, as a queue read's would have been).
	var token int64
	if w.l.tokens.Load() {
		_, st, err := p.c.s.Conn().Get(w.l.path)
		if err != nil {
			return view{}, r, err
		}
		token = st.Pzxid
	}
	w.regWatch = nil // nothing waits for it: a notification at most
	w.token, w.alone = token, false
	v.d = decision{Decision: Decision{Holds: true}, announce: true}
	return v, r, nil
}

// afterRead records what a read of the queue v (with the registry r read
// before it, if r.read) tells a registering waiter: whether it is chained,
// and, at the first look, whether it must make its marker; and the entry
// of its predecessor to watch if it will await that one's hold.
func (p *participant) afterRead(w *waiter, v view, r registry, first bool) error {
	w.regPred = ""
	if first && v.first == 0 || chainedBy(v.kids[:v.first], r) {
		w.chained = true
	}
	if err := p.markSize(w, v.kids[:v.first], first); err != nil {
		return err
	}
	if w.chained || v.d.Holds || !v.d.awaitHold || len(v.d.Watch) != 1 {
		return nil
	}
	pred := v.kids[v.d.Watch[0]]
	seq, ok := nodeSeq(pred.Name)
	size, sized := idSize(pred.Owner)
	if ok && sized {
		w.regPred = w.l.path + "/" + registryName + "/" + itemName(entryChained, seq, size)
	}
	return nil
}

// markSize makes our marker if our first look listed a node of a larger
// size than ours ahead of us (see the top of this file), in a multi that
// checks our node: it never outlives the node, and goes with it. A try
// whose outcome is unknown is made again on the next read (w.marker, once
// set, goes with our node whether it was made or not).
func (p *participant) markSize(w *waiter, ahead []Child, first bool) error {
	if first {
		w.marker = p.markerOf(w, ahead)
	}
	if w.marker == "" || w.markerMade {
		return nil
	}
	err := p.ensureRegistry(w, func(zc session.Conn) error {
		return zc.CreateEphemeralIf(w.nodes[0], w.marker, nil, p.c.s.ACL(w.marker))
	})
	switch {
	case err == nil, session.NodeExists(err):
		w.markerMade = true
		return nil
	case session.GoneAt(err, w.nodes[0]):
		return errRequeue
	}
	return err
}

// markerOf is the path of w's marker if a node ahead is of a larger size
// than w's, else "".
func (p *participant) markerOf(w *waiter, ahead []Child) string {
	size := w.l.pol.registers()
	seq, _ := nodeSeq(w.nodes[0]) // ours: always a zklock name with a sequence
	for _, k := range ahead {
		if s, sized := idSize(k.Owner); sized && s > size {
			return w.l.path + "/" + registryName + "/" + itemName(entryMarker, seq, size)
		}
	}
	return ""
}

// ensureRegistry runs op, and again after making the registry if op
// found it missing (the server reaps the container once it is empty).
func (p *participant) ensureRegistry(w *waiter, op func(session.Conn) error) error {
	zc := p.c.s.Conn()
	err := op(zc)
	if p.c.s.Classify(err) != session.Gone || session.GoneAt(err, w.nodes[0]) {
		return err
	}
	path := w.l.path + "/" + registryName
	if err := zc.CreateContainer(path, nil, p.c.s.ACL(path)); err != nil {
		return err
	}
	return op(zc)
}

// armEntry sets the exists watch on the entry of the predecessor whose
// hold w awaits, r(X): its creation chains w. done: decide again now (it
// exists already: w is chained; or the session needs sorting out). A
// watch left for an earlier predecessor is fired first, as a handoff's
// grant watch is (handoff.go, whose proof covers this one: a fire checks
// the firer's node, and only X's successor watches r(X)).
func (p *participant) armEntry(w *waiter) (done bool, err error) {
	if w.regPred == "" || w.armed == w.regPred {
		return false, nil
	}
	if err := p.disarm(w); err != nil || w.armed != "" {
		return true, err
	}
	exists, ch, err := p.c.s.Conn().ExistsW(w.regPred)
	switch {
	case err != nil:
		return true, nil // the loop sorts out the session
	case exists:
		// Its data watch goes with the entry, at X's release.
		w.chained = true
		return true, nil
	}
	w.armed, w.armedFor, w.grant = w.regPred, w.regPred, ch
	return false, nil
}

// entryHeard acts on the event of w's entry watch: NodeCreated, in the
// connection of st, chains w; anything else is read again.
func (p *participant) entryHeard(w *waiter, st session.Snapshot, ev session.Event) error {
	w.armed, w.armedFor, w.grant = "", "", nil
	if !session.Created(ev) {
		return nil
	}
	select {
	case <-st.Changed:
	default:
		w.chained = true
	}
	return nil
}

// register is the announce of a registering holder (see the top of this
// file): one multi that creates its entry and bumps its node's version,
// which waiters of older versions of zklock, and unchained ones, await.
// The entry, and a marker, go with the lease's node (session.Hold.Attach),
// attached before the multi: one whose reply was lost is taken as made.
func (p *participant) register(w *waiter, h *session.Hold) {
	if w.marker != "" {
		h.Attach(w.marker)
	}
	if !w.announce {
		return
	}
	seq, ok := nodeSeq(w.nodes[0])
	if !ok {
		p.announce(w)
		return
	}
	kind := byte(entryUnchained)
	if w.chained {
		kind = entryChained
	}
	entry := w.l.path + "/" + registryName + "/" + itemName(kind, seq, w.l.pol.registers())
	h.Attach(entry)
	node := w.nodes[0]
	sent := time.Now()
	// Register makes a missing _holders itself (session.Door.Register).
	zc := p.c.s.Conn()
	err := zc.Register(node, entry, w.l.data, 0, p.c.s.ACL)
	for session.BadVersion(err) {
		data, st, gerr := zc.Get(node)
		if err = gerr; err == nil {
			err = zc.Register(node, entry, data, st.Version, p.c.s.ACL)
		}
	}
	if err != nil && !session.NodeExists(err) {
		p.c.s.Log().Debug("zklock: register hold", "node", node, "err", err)
		return
	}
	p.c.s.Confirm(sent, p.session)
}

// readWithRegistry is [participant.read] with the registry read beside it,
// in parallel: an unchained waiter's read, which chains it if every node
// it lists ahead has an entry ([chainedBy]; the order of the two reads
// does not matter: an entry read before the queue's read is still there
// if its node is listed, as an entry goes only with its node; and one
// read after proves its node was registered and live then, while a node
// gone by then has none, and chains nobody). A failed read of the
// registry leaves r unread: no chain, and the queue decides as ever.
func (p *participant) readWithRegistry(w *waiter, epoch uint64) ([]Child, session.ParentStat, registry, error) {
	reg := make(chan registry, 1)
	go func() {
		r, err := p.readRegistry(w, false)
		if err != nil {
			r = registry{}
		}
		reg <- r
	}()
	kids, ps, err := p.read(w, epoch)
	return kids, ps, <-reg, err
}
