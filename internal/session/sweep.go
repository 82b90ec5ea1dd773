package session

import (
	"errors"
	"slices"
	"time"
)

// The sweep: after the session comes back on a new connection, the keeper
// checks every held node once, in multi-operations of checks
// ([sweepChunk] nodes each, one request per chunk, not one per lease). A
// node found gone ends its lease.
//
// Why. Every held node is covered by a watch (held.go), and go-zookeeper
// sets its watches again on a new connection (setWatches), where the server
// notifies each of the changes made after the request's RelativeZxid. That
// can miss a deletion:
//
//   - go-zookeeper sends the setWatches packets one after another and only
//     logs one that fails ("Failed to set previous watches"): the watches
//     of the rest are on no server, and its table keeps them.
//   - The RelativeZxid is the zxid the connection started from (the wire's,
//     zxid.go), and replies on the new connection can carry a
//     later zxid before its setWatches are answered (requests queued while
//     it was down go out ahead of them; the second packet only after the
//     first is answered). If the connection drops then, the next starts
//     from a zxid past deletions whose notices never came.
//
// Why the sweep closes it. Take a held node deleted at zxid D, whose
// notice never comes. Every connection after the one on which the node
// was last watched is followed by a sweep that checks it (a sweep
// interrupted by a drop is done again after the next connection). If D
// comes before the sweep's check of the node, the check finds it gone
// (ZooKeeper applies the multi after D: it is a later transaction). If D
// comes after it, D is after the connection started (the check went out on
// it, or on a later one), so D is after that connection's RelativeZxid:
// the server notifies it there, on setWatches or through the watch set
// again, unless the connection drops first, and then the next connection's
// sweep comes after D and finds the node gone.
//
// The keeper's confirmation checks a sample of held nodes every round
// (maxChecked); before the sweep that was the only backstop, and with
// 3,000 leases TestDeletedHeldNodesAmongThousands saw a deleted node's
// lease still held 30 s later in 2 of about 15 runs against a loaded
// server. TestFakeHeldNodesCheckedAfterAReconnect loses the watches on the
// fake and keeps the sample out.

// sweepChunk bounds the checks of one multi-operation: a few tens of KiB,
// far below the server's 1 MiB request limit (jute.maxbuffer).
const sweepChunk = 256

// sweeping is the keeper's task for a sweep: due at once when one is
// wanted (Session.sweepWant, bumped by onState when the session comes back
// on a new connection) and connected, unless a failure holds it off.
func (k *keeper) sweeping(v keeperView, t time.Duration) (time.Time, func()) {
	if v.sweep == k.swept || !v.connected {
		return time.Time{}, nil
	}
	return k.retryAt, func() {
		if k.sweep(v, t) {
			k.swept = v.sweep
		} else {
			k.retryAt = time.Now().Add(t / 12)
		}
	}
}

// sweep checks every held node of v's session, a chunk at a time, as a
// confirmation checks its sample ([keeper.confirm]: the leases still end at
// their deadline while a check hangs, and each chunk confirms the
// session). A node found gone ends its lease, and the rest of its chunk is
// checked again without it. It reports whether every node was checked. A
// reconnect during a sweep wants another, which runs after it.
func (k *keeper) sweep(v keeperView, t time.Duration) bool {
	for _, chunk := range k.c.heldNodes(v.session) {
		for len(chunk) > 0 {
			err := k.confirm(chunk, v.session, t, v.holding, v.deadline, v.changed)
			var g *goneNode
			if !errors.As(err, &g) {
				if err != nil {
					return false
				}
				break
			}
			chunk = slices.DeleteFunc(chunk, func(n string) bool { return n == g.path })
		}
	}
	return true
}

func (c *Session) heldNodes(session int64) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []string
	for l := range c.held.leases {
		if l.session == session {
			all = append(all, l.nodes...)
		}
	}
	var chunks [][]string
	for len(all) > 0 {
		n := min(len(all), sweepChunk)
		chunks, all = append(chunks, all[:n:n]), all[n:]
	}
	return chunks
}
