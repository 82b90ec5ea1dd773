package zklock

import (
	"bytes"
	"context"
	"fmt"

	"github.com/zkrecipes/zklock/internal/session"
)

// revokeMessage is what a holder's node data is set to when someone asks it
// to let go: Apache Curator's LockInternals.REVOKE_MESSAGE, which Curator's
// Revoker writes and its revocable locks watch for.
var revokeMessage = []byte("__REVOKE__")

// Revoke asks the holder of node (a lock node's full path, as
// [Lease.Node] or [Participant.Node] give it) to let go, the way Apache
// Curator's Revoker does: it writes "__REVOKE__" into the node. Revocation
// is cooperative: a zklock holder sees it on [Lease.Revoked], a Curator
// holder made revocable on its RevocationListener, and each decides
// whether to release. Nothing changes for other participants.
//
// It retries connection errors until ctx is done. A node that does not
// exist (released already, or never there) is an error wrapping
// zk.ErrNoNode. A nil Client or a malformed path fails with
// ErrInvalidArgument before any ZooKeeper call.
func Revoke(ctx context.Context, c *Client, node string) error {
	fail := func(err error) error { return nodeError("revoke", "", node, err) }
	switch {
	case ctx == nil:
		return fail(invalidf("nil context"))
	case c == nil:
		return fail(invalidf("nil client"))
	}
	if err := validatePath(node); err != nil {
		return fail(err)
	}
	err := c.s.Retry(ctx, func(zc session.Conn) error { return zc.Set(node, revokeMessage) })
	if c.s.Classify(err) == session.Gone {
		return fail(fmt.Errorf("no such lock node: %w", err))
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// Revoked returns a channel that is closed when someone asks this holder to
// let go: [Revoke], or Apache Curator's Revoker, wrote "__REVOKE__" into the
// lease's node. The lease stays held until you release it; what to do is
// yours to decide.
//
// The first call starts watching the node (one getData watch, set again
// after any other change of its data); a goroutine waits on it until the
// lease ends. A lease that is never asked for Revoked costs nothing. The
// leases on a shared read node ([WithSharedReads]) share one watch. A
// [MultiLock]'s lease watches its node on the first path, the one
// [Lease.Node] names.
func (l *Lease) Revoked() <-chan struct{} {
	if l.sub != nil {
		return l.sub.cl.base.Revoked() // the node's: every lease on it is revoked with it
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.revoked == nil {
		l.revoked = make(chan struct{})
		select {
		case <-l.Done():
		default:
			go l.watchRevocation()
		}
	}
	return l.revoked
}

// watchRevocation closes l.revoked when the node says so. It ends with the
// lease: when Done closes, or when the watch says the node or the session is
// gone.
func (l *Lease) watchRevocation() {
	for {
		data, _, ch, err := l.c.s.Conn().GetDataW(l.node)
		switch l.c.s.Classify(err) {
		case session.Done:
			if bytes.Equal(data, revokeMessage) {
				close(l.revoked)
				return
			}
			select {
			case <-ch:
				continue // changed: read it again
			case <-l.Done():
				return
			}
		case session.Retry:
			st := l.c.s.State()
			select {
			case <-st.Changed: // try again on the next connection
			case <-l.Done():
				return
			}
		default:
			return // the node or the Client is gone: so is the lease
		}
	}
}
