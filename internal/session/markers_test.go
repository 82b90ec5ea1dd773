package session

import "testing"

// An expectation closes when a packet carrying its marker has been
// written, not before and not for other packets, and stop forgets it.
func TestWireExpect(t *testing.T) {
	w := testWire(Options{})
	c := w.newConn(nopConn{}, "zk1:2181")
	sent, _ := w.marks.expect("/a/_c_x-lock-")
	other, stop := w.marks.expect("/b/_c_y-lock-")
	if _, err := c.Write([]byte("....create /a/_c_z-lock-")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
		t.Fatal("closed by a packet without its marker")
	default:
	}
	if _, err := c.Write([]byte("....create /a/_c_x-lock-")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
	default:
		t.Fatal("not closed by the packet that carries its marker")
	}
	stop()
	if len(w.marks.waits) != 0 {
		t.Fatalf("%d expectations left, want none", len(w.marks.waits))
	}
	select {
	case <-other:
		t.Fatal("a stopped expectation closed")
	default:
	}
}
