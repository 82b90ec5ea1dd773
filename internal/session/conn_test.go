package session

import "net"

type nopConn struct{ net.Conn }

func (nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (nopConn) Close() error                { return nil }

// bytesConn reads data, at most chunk bytes at a time.
type bytesConn struct {
	net.Conn
	data  []byte
	chunk int
}

func (b *bytesConn) Read(p []byte) (int, error) {
	n := min(len(p), b.chunk, len(b.data))
	copy(p, b.data[:n])
	b.data = b.data[n:]
	return n, nil
}
