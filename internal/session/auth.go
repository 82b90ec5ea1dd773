package session

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Credentials go out on every connection, from the wire, right behind the
// connect request, as ZooKeeper's Java client sends them
// (ClientCnxn.SendThread.primeConnection: an AuthPacket with xid -4 per
// credential, after the ConnectRequest and before anything queued). The
// server reads a connection's packets in order and handles an AuthPacket
// as it reads it (ZooKeeperServer.processPacket, not through the request
// pipeline; the packets that follow a connect request wait until the
// session is set up: processConnectRequest's disableRecv), so every
// request on every connection is made with the credentials.
//
// go-zookeeper's own way (Conn.AddAuth, then re-sent at each reconnect by
// resendZkAuth) is kept out of it for two reasons:
//   - Its credentials belong to one zk.Conn. The connection the Session
//     opens to replace one that no server took (replace) had none, and
//     every request after it was made without them: NoAuth on the nodes
//     only their identity may touch, InvalidACL for WithACL's auth ACLs.
//     TestReplacedConnectionKeepsTheCredentials.
//   - Its re-send can wedge the connection for good (wireConn.Write).
//
// Their replies (xid -4) are handed to go-zookeeper as ping replies (xid
// -2), which it ignores, rather than logged as unknown ones: the two
// differ in the xid's last byte only, so the change is made as that byte
// passes, whatever the reads split (hideAuthXid). A refusal (AUTHFAILED,
// after which the server closes the connection) is kept for Open, which
// fails with it (awaitCredentials).
type credentials struct {
	packets []byte   // the AuthPackets, framed, in order
	schemes []string // each packet's scheme, for errors
}

// authXidBits is authXid as it goes on the wire.
var authXidBits = func() uint32 { x := int32(authXid); return uint32(x) }()

const (
	authXid        = -4 // the xid of an AuthPacket and its reply
	pingXid        = -2
	opAuth         = 100
	zkAuthFailCode = -115 // KeeperException.Code.AUTHFAILED
)

// newCredentials frames an AuthPacket (type 0, scheme, auth) per
// credential, as jute writes it: ints and lengths big-endian.
func newCredentials(auths []Auth) credentials {
	var cr credentials
	for _, a := range auths {
		body := 4 + 4 + 4 + 4 + len(a.Scheme) + 4 + len(a.Auth) // xid, op, type, scheme, auth
		p := binary.BigEndian.AppendUint32(nil, uint32(body))
		p = binary.BigEndian.AppendUint32(p, authXidBits)
		p = binary.BigEndian.AppendUint32(p, opAuth)
		p = binary.BigEndian.AppendUint32(p, 0)
		p = binary.BigEndian.AppendUint32(p, uint32(len(a.Scheme)))
		p = append(p, a.Scheme...)
		p = binary.BigEndian.AppendUint32(p, uint32(len(a.Auth)))
		p = append(p, a.Auth...)
		cr.packets = append(cr.packets, p...)
		cr.schemes = append(cr.schemes, a.Scheme)
	}
	return cr
}

// withCredentials returns the connect request p followed by the
// credentials, for one Write, and sets how many replies c awaits.
func (c *wireConn) withCredentials(p []byte) []byte {
	cr := &c.w.creds
	if len(cr.schemes) == 0 {
		return p
	}
	c.w.mu.Lock()
	c.authLeft = len(cr.schemes)
	c.w.mu.Unlock()
	return append(append(make([]byte, 0, len(p)+len(cr.packets)), p...), cr.packets...)
}

// authReplyLocked takes the reply to one of c's credentials, whose error
// code is code. w.mu is held.
func (c *wireConn) authReplyLocked(code int32) {
	w := c.w
	if c.authLeft == 0 {
		return // not ours: nothing else sends xid -4
	}
	scheme := w.creds.schemes[len(w.creds.schemes)-c.authLeft]
	c.authLeft--
	switch {
	case code != 0:
		err := fmt.Errorf("zookeeper error %d", code)
		if code == zkAuthFailCode {
			err = zk.ErrAuthFailed
		}
		w.authErr = fmt.Errorf("auth %s: %w", scheme, err)
		w.log().Warn("zklock: the server refused the credentials", "scheme", scheme, "err", err)
	case c.authLeft == 0:
		w.authed = true
	default:
		return
	}
	close(w.authChanged)
	w.authChanged = make(chan struct{})
}

// hideAuthXid makes the reply whose header r is reading, if it answers a
// credential (xid -4), a ping reply (xid -2) in b, the part of the
// header just read, which starts at header offset from: -4 and -2 differ
// in their last byte only, which is in b once the whole xid is known.
func (r *reader) hideAuthXid(b []byte, from int) {
	if !r.shook || from > 3 || r.nhdr < 4 || int32(binary.BigEndian.Uint32(r.hdr[0:4])) != authXid {
		return
	}
	b[3-from] = byte(pingXid & 0xff)
}

// awaitCredentials waits until a connection has had every credential
// accepted, and returns nil; or returns the refusal of one, or ctx's
// error. With no credentials it returns at once.
func (w *wire) awaitCredentials(ctx context.Context) error {
	if len(w.creds.schemes) == 0 {
		return nil
	}
	for {
		w.mu.Lock()
		ok, err, changed := w.authed, w.authErr, w.authChanged
		w.mu.Unlock()
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
