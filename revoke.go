package zklock

import (
	"bytes"
	"context"
	"fmt"
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
	fail := func(err error) error { return fmt.Errorf("zklock: revoke %s: %w", node, err) }
	switch {
	case ctx == nil:
		return fail(invalidf("nil context"))
	case c == nil:
		return fail(invalidf("nil client"))
	}
	if err := validatePath(node); err != nil {
		return fail(err)
	}
	err := c.retry(ctx, func(zc conn) error { return zc.set(node, revokeMessage) })
	if c.classify(err) == gone {
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
// lease ends. A lease that is never asked for Revoked costs nothing. A
// [MultiLock]'s lease watches its node on the first path, the one
// [Lease.Node] names.
func (l *Lease) Revoked() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.revoked == nil {
		l.revoked = make(chan struct{})
		if l.err == nil {
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
		data, _, ch, err := l.c.conn().getDataW(l.node)
		switch l.c.classify(err) {
		case done:
			if bytes.Equal(data, revokeMessage) {
				close(l.revoked)
				return
			}
			select {
			case <-ch:
				continue // changed: read it again
			case <-l.done:
				return
			}
		case retry:
			st := l.c.state()
			select {
			case <-st.changed: // try again on the next connection
			case <-l.done:
				return
			}
		default:
			return // the node or the Client is gone: so is the lease
		}
	}
}
