package session

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"

	"github.com/go-zookeeper/zk"
)

// credentials go out on every connection, from the wire, right behind the
// connect request, as ZooKeeper's Java client sends them
// (ClientCnxn.SendThread.primeConnection: an AuthPacket, xid -4, per
// credential, after the ConnectRequest and before anything queued). The
// server handles each AuthPacket as it reads it, in order, outside the
// request pipeline (ZooKeeperServer.processPacket), and reads nothing more
// until the session is set up (processConnectRequest's disableRecv): every
// request on every connection is made with the credentials.
//
// Not go-zookeeper's Conn.AddAuth (resendZkAuth re-sends it at reconnects):
//   - Its credentials belong to one zk.Conn: the connection that replace
//     opens had none, and every request on it failed NoAuth on the nodes
//     only their identity may touch, InvalidACL for WithACL's auth ACLs.
//     TestReplacedConnectionKeepsTheCredentials.
//   - Its re-send can wedge the connection for good (wireConn.Write).
//
// go-zookeeper logs each reply (xid -4) as an unknown negative xid
// ("Xid < 0 ... but not ping or watcher event", Conn.recvLoop), which
// zkLogger takes at Debug, and goes on. The wire reads the replies' error
// codes: a refusal (AUTHFAILED, after which the server closes the
// connection) is kept for Open to fail with (await).
type credentials struct {
	packets []byte   // the AuthPackets, framed, in order
	schemes []string // each packet's scheme, for errors

	mu      sync.Mutex
	authed  bool          // a connection had them all accepted
	err     error         // the last refusal
	changed chan struct{} // closed when either changes
}

const (
	authXid        = -4 // the xid of an AuthPacket and its reply
	opAuth         = 100
	zkAuthFailCode = -115 // KeeperException.Code.AUTHFAILED
)

// set frames an AuthPacket (type 0, scheme, auth) per credential, as jute
// writes it: ints and lengths big-endian.
func (cr *credentials) set(auths []Auth) {
	xid := int32(authXid)
	for _, a := range auths {
		body := 4 + 4 + 4 + 4 + len(a.Scheme) + 4 + len(a.Auth) // xid, op, type, scheme, auth
		p := binary.BigEndian.AppendUint32(nil, uint32(body))
		p = binary.BigEndian.AppendUint32(p, uint32(xid))
		p = binary.BigEndian.AppendUint32(p, opAuth)
		p = binary.BigEndian.AppendUint32(p, 0)
		p = binary.BigEndian.AppendUint32(p, uint32(len(a.Scheme)))
		p = append(p, a.Scheme...)
		p = binary.BigEndian.AppendUint32(p, uint32(len(a.Auth)))
		p = append(p, a.Auth...)
		cr.packets = append(cr.packets, p...)
		cr.schemes = append(cr.schemes, a.Scheme)
	}
}

// behind returns the connect request p followed by the credentials, for
// one Write, and sets how many replies c awaits.
func (cr *credentials) behind(c *wireConn, p []byte) []byte {
	if len(cr.schemes) == 0 {
		return p
	}
	cr.mu.Lock()
	c.authLeft = len(cr.schemes)
	cr.mu.Unlock()
	return append(append(make([]byte, 0, len(p)+len(cr.packets)), p...), cr.packets...)
}

// reply takes a reply of xid -4 read on c, whose error code is code.
func (cr *credentials) reply(c *wireConn, code int32, log *slog.Logger) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if c.authLeft == 0 {
		return // not ours: nothing else sends xid -4
	}
	scheme := cr.schemes[len(cr.schemes)-c.authLeft]
	c.authLeft--
	switch {
	case code != 0:
		err := fmt.Errorf("zookeeper error %d", code)
		if code == zkAuthFailCode {
			err = zk.ErrAuthFailed
		}
		cr.err = fmt.Errorf("auth %s: %w", scheme, err)
		log.Warn("zklock: the server refused the credentials", "scheme", scheme, "err", err)
	case c.authLeft == 0:
		cr.authed = true
	default:
		return
	}
	close(cr.changed)
	cr.changed = make(chan struct{})
}

// await waits until a connection has had every credential accepted (nil),
// one is refused (its error) or ctx ends; with none, it returns at once.
func (cr *credentials) await(ctx context.Context) error {
	if len(cr.schemes) == 0 {
		return nil
	}
	for {
		cr.mu.Lock()
		ok, err, changed := cr.authed, cr.err, cr.changed
		cr.mu.Unlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
