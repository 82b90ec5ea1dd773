package zklock_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// records is a slog.Handler that keeps every record it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (*records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *records) WithGroup(string) slog.Handler          { return h }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// about returns the records that mention node, as "LEVEL message".
func (h *records) about(node string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		mentions := false
		r.Attrs(func(a slog.Attr) bool {
			mentions = mentions || a.Value.String() == node
			return !mentions
		})
		if mentions {
			out = append(out, r.Level.String()+" "+r.Message)
		}
	}
	return out
}

// levelsOf returns the levels of the records whose message is msg.
func (h *records) levelsOf(msg string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Message == msg {
			out = append(out, r.Level.String())
		}
	}
	return out
}

// A lease lost to ZooKeeper is logged at Warn; the leases Close ends, as
// the caller asked, at Info.
func TestFakeCloseLogsLeasesAtInfo(t *testing.T) {
	f := zkfake.New()
	var h records
	c := fakeClient(t, f, zklock.WithLogger(slog.New(&h)))
	m, err := zklock.NewMutex(c, "/log/lock")
	must(t, err)

	lost, err := m.Acquire(ctxT(t))
	must(t, err)
	must(t, f.Delete(lost.Node()))
	mustIs(t, doneWithin(t, lost), zklock.ErrNodeDeleted)
	eventually(t, func() bool { return len(h.about(lost.Node())) > 0 }, "a record of the lost lease") // logged once Done is closed
	if got := h.about(lost.Node()); len(got) != 1 || !strings.HasPrefix(got[0], "WARN ") {
		t.Fatalf("records of a lease whose node was deleted: %q, want one at Warn", got)
	}

	closed, err := m.Acquire(ctxT(t))
	must(t, err)
	must(t, c.Close()) // which logs before it returns
	mustIs(t, closed.Err(), zklock.ErrClientClosed)
	if got := h.about(closed.Node()); len(got) != 1 || !strings.HasPrefix(got[0], "INFO ") {
		t.Fatalf("records of a lease that Close ended: %q, want one at Info", got)
	}
}
