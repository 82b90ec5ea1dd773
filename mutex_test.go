package zklock_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

func TestMutexExclusion(t *testing.T) {
	t.Parallel()
	const clients, cycles = 8, 25
	path := lockPath(t)
	var (
		inside, violations atomic.Int32
		mu                 sync.Mutex
		tokens             []int64
	)
	hammer(t, clients, cycles, func() contender {
		m := newMutex(t, connect(t), path)
		return contender{acquire: one(m.Acquire), held: func(_ context.Context, ls []*zklock.Lease) error {
			if inside.Add(1) != 1 {
				violations.Add(1)
			}
			defer inside.Add(-1)
			mu.Lock()
			tokens = append(tokens, ls[0].Token())
			mu.Unlock()
			return nil
		}}
	})
	if n := violations.Load(); n != 0 {
		t.Fatalf("two holders at once, %d times", n)
	}
	if len(tokens) != clients*cycles {
		t.Fatalf("%d acquisitions, want %d", len(tokens), clients*cycles)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens must strictly increase across holders: #%d is %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	if kids := children(t, connect(t), path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestMutexFIFO(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	first, err := m.Acquire(ctxT(t))
	must(t, err)

	const waiters = 5
	ctx := ctxT(t)
	order := make(chan int, waiters)
	for i := 0; i < waiters; i++ {
		i := i
		wm := newMutex(t, connect(t), path)
		go func() {
			l, err := wm.Acquire(ctx)
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i // before releasing: the next waiter cannot have sent yet
			_ = l.Release(context.Background())
		}()
		queued(t, c, path, i+2) // queue them one after the other
	}
	release(t, first)
	for i := 0; i < waiters; i++ {
		select {
		case got := <-order:
			if got != i {
				t.Fatalf("FIFO order: waiter %d acquired in turn %d", got, i)
			}
		case <-time.After(long):
			t.Fatal("waiter did not acquire")
		}
	}
}

func TestTryAcquire(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.TryAcquire(ctxT(t))
	must(t, err)

	other := newMutex(t, connect(t), path)
	_, err = other.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked)
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("a failed TryAcquire leaves no node: children %v", kids)
	}

	release(t, l)
	l2, err := other.TryAcquire(ctxT(t))
	must(t, err)
	release(t, l2)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestParticipants(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	data := []byte("holder")
	m := newMutex(t, c, path, zklock.WithNodeData(data))
	copy(data, "xxxxxx") // WithNodeData copied it
	parts, err := m.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 0 {
		t.Fatalf("no lock path yet, but participants %+v", parts)
	}

	l, err := m.Acquire(ctxT(t))
	must(t, err)
	w := newMutex(t, connect(t), path)
	ch := async(w.Acquire, ctxT(t))
	queued(t, c, path, 2)

	parts, err = m.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, false}) {
		t.Fatalf("want a holder and a waiter: %+v", parts)
	}
	if parts[0].Node != l.Node() {
		t.Fatalf("the holder is %s, want our %s", parts[0].Node, l.Node())
	}
	if !bytes.Equal(parts[0].Data, []byte("holder")) {
		t.Fatalf("holder's data %q, want %q as given to WithNodeData", parts[0].Data, "holder")
	}
	if !strings.Contains(string(parts[1].Data), "/") {
		t.Fatalf("default data is host/pid, got %q", parts[1].Data)
	}
	release(t, l)
	release(t, await(t, ch))
}

func TestNodeFormat(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	mutexNode := regexp.MustCompile(`^` + regexp.QuoteMeta(path) +
		`/_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$`)
	if !mutexNode.MatchString(l.Node()) {
		t.Fatalf("mutex node %s does not match %s", l.Node(), mutexNode)
	}
	_, stat, err := c.Conn().Get(l.Node())
	must(t, err)
	if stat.EphemeralOwner != c.SessionID() {
		t.Fatalf("node owned by session %#x, want ours %#x", stat.EphemeralOwner, c.SessionID())
	}
	if l.Token() != stat.Czxid {
		t.Fatalf("token %d, want the node's czxid %d", l.Token(), stat.Czxid)
	}
	release(t, l)

	rw := newRW(t, c, path+"rw")
	r, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if !regexp.MustCompile(`/_c_[0-9a-f-]{36}-__READ__\d{10}$`).MatchString(r.Node()) {
		t.Fatalf("read node %s", r.Node())
	}
	release(t, r)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	if !regexp.MustCompile(`/_c_[0-9a-f-]{36}-__WRIT__\d{10}$`).MatchString(w.Node()) {
		t.Fatalf("write node %s", w.Node())
	}
	release(t, w)
}

func newMutex(t testing.TB, c *zklock.Client, path string, opts ...zklock.LockOption) *zklock.Mutex {
	t.Helper()
	m, err := zklock.NewMutex(c, path, opts...)
	must(t, err, "new mutex %s", path)
	return m
}
