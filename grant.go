package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// Granting: turning waiters that all hold into leases.

// grant turns our nodes into leases once every waiter holds: if no
// own-node watch has fired ([participant.quiet]) and the session is still
// st's. It returns nil leases if the caller must decide again, after
// waiting for the quorum to confirm the session if its deadline was behind
// (it never grants past the deadline).
func (p *participant) grant(ctx context.Context, st session.Snapshot) ([]*Lease, error) {
	if quiet, err := p.quiet(); !quiet {
		return nil, err
	}
	if ready, err := p.disarmHeld(); !ready {
		if err == nil {
			// A fire that failed (a connection error): decide again after
			// a pause, as after any read that failed.
			err = session.Sleep(ctx, p.c.s.NewBackOff().NextBackOff())
		}
		return nil, err
	}
	holds, err := p.c.s.Grant(session.Grant{
		Epoch:   st.Epoch,
		Session: p.session,
		Groups:  p.groups(),
		Token:   p.token(),
		// A grant's token from a server before 3.9 is read when first
		// asked for (handoff.go).
		TokenPath: p.tokenPath(),
		Meta:      p.leaseMeta(),
		Covers:    p.covers(),
		// A handoff's holder fires its grant as it releases (handoff.go).
		Handoffs: p.handoffs(),
		Alone:    p.alone(),
	})
	if errors.Is(err, session.ErrUnconfirmed) {
		p.startWaiting() // the keeper confirms the session only for leases held or awaited
		return nil, p.c.s.AwaitConfirmed(ctx, st)
	}
	if holds == nil {
		return nil, err
	}
	leases := make([]*Lease, len(holds))
	for i, h := range holds {
		leases[i] = newLease(p.c, h)
	}
	for _, w := range p.ws {
		w.look.End()
		switch {
		case p.registers():
			p.register(w, holds[0])
		case w.announce:
			p.announce(w)
		}
	}
	return leases, err
}

// quiet reports whether no own-node watch has fired. ZooKeeper sends a
// client's notifications in order with its replies, and go-zookeeper hands
// each one to its watcher before reading the next off the connection, so
// quiet watches mean every node of ours was there at the latest state we
// saw. One that has fired makes its path undecided (read again); a
// deletion means queue again.
func (p *participant) quiet() (bool, error) {
	quiet := true
	for _, w := range p.ws {
		select {
		case ev := <-w.own:
			w.own, w.held, quiet = nil, false, false
			if session.Deleted(ev) {
				return false, errRequeue
			}
		default:
		}
	}
	return quiet, nil
}

// groups are the nodes of each lease to grant: one lease per node, or one
// for all of them (a MultiLock's, whose first node is the lease's Node).
func (p *participant) groups() [][]string {
	var all []string
	for _, w := range p.ws {
		all = append(all, w.nodes...)
	}
	if p.whole {
		return [][]string{all}
	}
	groups := make([][]string, len(all))
	for i := range all {
		groups[i] = all[i : i+1]
	}
	return groups
}

// token is the fencing token of a lease: the largest of its waiters'
// tokens, each the lock path's pzxid (the zxid of its latest child create
// or delete, DataTree.createNode and deleteNode) in the read that decided
// the waiter holds. They strictly increase across successive conflicting
// holders: H's deciding read lists no earlier conflicting holder, so its
// pzxid is at least that holder's delete, while the holder's own deciding
// read listed its node, so was of a state before that delete. The proof,
// with a MultiLock's and a place's, is in docs/design.md, "Tokens";
// TestMutexExclusion checks them.
func (p *participant) token() int64 {
	var t int64
	for _, w := range p.ws {
		t = max(t, w.token)
	}
	return t
}

// announce tells successors waiting with awaitHold on our last node of w
// that we hold, by bumping its version. If someone wrote to it since its
// create (a revocation), what they wrote stays: the bump writes the node's
// data back.
func (p *participant) announce(w *waiter) {
	zc, node := p.c.s.Conn(), w.nodes[len(w.nodes)-1]
	sent := time.Now()
	err := zc.SetIf(node, w.l.data, 0)
	for session.BadVersion(err) {
		data, ns, gerr := zc.Get(node)
		if err = gerr; err == nil {
			err = zc.SetIf(node, data, ns.Version)
		}
	}
	if err != nil {
		p.c.s.Log().Debug("zklock: announce hold", "node", node, "err", err)
		return
	}
	p.c.s.Confirm(sent, p.session)
}
