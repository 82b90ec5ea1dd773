package zktest

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// connectFrame is a connect request as go-zookeeper writes it.
func connectFrame(session int64, passwd []byte) []byte {
	be := binary.BigEndian
	b := make([]byte, 4, 64)
	b = be.AppendUint32(b, 0)            // protocolVersion
	b = be.AppendUint64(b, 0x1122334455) // lastZxidSeen
	b = be.AppendUint32(b, 10000)        // timeOut
	b = be.AppendUint64(b, uint64(session))
	b = be.AppendUint32(b, uint32(len(passwd)))
	b = append(b, passwd...)
	b = append(b, 0) // readOnly
	be.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestAskNewSession(t *testing.T) {
	passwd := bytes.Repeat([]byte{0xab}, 16)
	frame := connectFrame(0x1234, passwd)
	if !askNewSession(frame) {
		t.Fatal("a reconnect's request was not rewritten")
	}
	if want := connectFrame(0, make([]byte, 16)); !bytes.Equal(frame, want) {
		t.Fatalf("rewritten to\n%x\nwant\n%x", frame, want)
	}

	for name, frame := range map[string][]byte{
		"first connect": connectFrame(0, make([]byte, 16)),
		"short":         connectFrame(0x1234, passwd)[:20],
		"length lies":   append(connectFrame(0x1234, passwd), 1),
	} {
		before := bytes.Clone(frame)
		if askNewSession(frame) || !bytes.Equal(frame, before) {
			t.Errorf("%s: rewritten", name)
		}
	}
}
