package zklock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/faults"
)

// long bounds every wait in these tests: far above what any step needs, so
// a hang fails instead of blocking the run.
const long = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*long)
	t.Cleanup(cancel)
	return ctx
}

// msg formats the optional description of an assertion: a format and its
// arguments, as t.Fatalf takes them.
func msg(what []any) string {
	if len(what) == 0 {
		return ""
	}
	if format, ok := what[0].(string); ok {
		return fmt.Sprintf(format, what[1:]...) + ": "
	}
	return fmt.Sprint(what...) + ": "
}

// must stops the test if err is not nil. what, if given, is a format and its
// arguments saying what was being done.
func must(t testing.TB, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sunexpected error: %v", msg(what), err)
	}
}

// mustIs stops the test unless errors.Is(err, target).
func mustIs(t testing.TB, err, target error, what ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%sgot error %v, want one for which errors.Is(err, %q)", msg(what), err, target)
	}
}

// eventually polls cond until it holds, and stops the test if it does not
// within long. cond runs on the test's goroutine, so it may stop the test
// itself.
func eventually(t testing.TB, cond func() bool, what ...any) {
	t.Helper()
	deadline := time.NewTimer(long)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%scondition not met within %v", msg(what), long)
		case <-tick.C:
		}
	}
}

// connect opens a Client of its own session, closed when the test ends.
func connect(t testing.TB, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	c, err := zklock.Connect(ctxT(t), servers(t), opts...)
	must(t, err, "connect")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// faulty opens a Client whose transport the test can break.
func faulty(t testing.TB, session time.Duration, opts ...zklock.Option) (*zklock.Client, *faults.Faults) {
	t.Helper()
	f := faults.New(nil)
	t.Cleanup(f.Close) // registered first, so it runs after the Client's Close
	c := connect(t, append([]zklock.Option{zklock.WithDialer(f.Dialer()), zklock.WithSessionTimeout(session)}, opts...)...)
	return c, f
}

// lockPath returns a path of the test's own.
func lockPath(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/zklock-test/" + name + "-" + hex.EncodeToString(b[:]) + "/lock"
}

// children returns the lock path's children (none if it does not exist), as
// the leader has them: with several servers, c's own server may lag behind
// a write another client has seen acknowledged.
func children(t testing.TB, c *zklock.Client, path string) []string {
	t.Helper()
	if _, err := c.Conn().Sync(path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("sync %s: %v", path, err)
	}
	kids, _, err := c.Conn().Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	must(t, err, "children of %s", path)
	return withoutRegistry(t, c, path, kids)
}

// withoutRegistry is kids, the children of a lock path, but a semaphore's
// registry (`_holders`, registry.go), a container the server reaps once
// empty: no participant. With no participant left, the registry's
// children are listed instead, if any: an entry or marker left behind.
func withoutRegistry(t testing.TB, c *zklock.Client, path string, kids []string) []string {
	t.Helper()
	i := slices.Index(kids, "_holders")
	if i < 0 {
		return kids
	}
	kids = slices.Delete(slices.Clone(kids), i, i+1)
	if len(kids) > 0 {
		return kids
	}
	left, _, err := c.Conn().Children(path + "/_holders")
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	must(t, err, "children of %s/_holders", path)
	for i, n := range left {
		left[i] = "_holders/" + n
	}
	return left
}

type result struct {
	lease *zklock.Lease
	err   error
}

// async runs an acquire in the background.
func async(acquire func(context.Context) (*zklock.Lease, error), ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- result{l, err}
	}()
	return ch
}

// returned waits for an acquire started with async to return, whatever it
// returns.
func returned(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(long):
		t.Fatal("acquire did not return")
		return result{}
	}
}

// await waits for an acquire started with async to succeed.
func await(t testing.TB, ch <-chan result) *zklock.Lease {
	t.Helper()
	r := returned(t, ch)
	must(t, r.err, "acquire")
	return r.lease
}

// pending asserts that an acquire started with async has not returned.
func pending(t testing.TB, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("acquire returned early: %v %v", r.lease, r.err)
	default:
	}
}

// queued waits until the lock path has n participants.
func queued(t testing.TB, c *zklock.Client, path string, n int) {
	t.Helper()
	eventually(t, func() bool { return len(children(t, c, path)) == n }, "want %d participants on %s", n, path)
}

// holders returns which of parts hold, and which are read-side, in order.
func holders(parts []zklock.Participant) (held, read []bool) {
	for _, p := range parts {
		held, read = append(held, p.Holder), append(read, p.Read)
	}
	return held, read
}

func release(t testing.TB, l *zklock.Lease) {
	t.Helper()
	must(t, l.Release(ctxT(t)), "release %s", l.Node())
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// parentsOf returns p's ancestors and p, outermost first.
func parentsOf(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

// contender is one client of hammer: how it acquires, and what it checks
// while it holds.
type contender struct {
	acquire func(context.Context) ([]*zklock.Lease, error)
	held    func(context.Context, []*zklock.Lease) error // runs between acquire and release
}

// hammer runs clients goroutines, each with a contender from open (each its
// own Client), doing cycles of acquire, held, release. It fails the test if
// any step fails, or if the goroutines do not all finish in time.
func hammer(t *testing.T, clients, cycles int, open func() contender) {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				ls, err := c.acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.held(ctx, ls); err != nil {
					t.Error(err)
				}
				for _, l := range ls {
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * long):
		t.Fatal("contending clients did not finish: deadlock?")
	}
}

// one adapts a single-lease acquire to hammer.
func one(acquire func(context.Context) (*zklock.Lease, error)) func(context.Context) ([]*zklock.Lease, error) {
	return func(ctx context.Context) ([]*zklock.Lease, error) {
		l, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		return []*zklock.Lease{l}, nil
	}
}

// waitGroup waits for wg, and fails t with what if it does not finish
// in time.
func waitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(long):
		t.Fatal(what)
	}
}

// acquireN takes n leases, one acquire at a time; it fails tb on the
// first error.
func acquireN(tb testing.TB, acquire func(context.Context) (*zklock.Lease, error), n int) []*zklock.Lease {
	tb.Helper()
	var leases []*zklock.Lease
	for i := 0; i < n; i++ {
		l, err := acquire(ctxT(tb))
		must(tb, err, "acquire %d of %d", i+1, n)
		leases = append(leases, l)
	}
	return leases
}

// acquireAll acquires every mutex, 64 at a time, and returns their leases
// in order; it fails tb on the first error.
func acquireAll(tb testing.TB, ctx context.Context, mutexes []*zklock.Mutex) []*zklock.Lease {
	tb.Helper()
	leases := make([]*zklock.Lease, len(mutexes))
	var wg sync.WaitGroup
	errs := make(chan error, len(mutexes))
	sem := make(chan struct{}, 64)
	for i, m := range mutexes {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, m *zklock.Mutex) {
			defer wg.Done()
			defer func() { <-sem }()
			l, err := m.Acquire(ctx)
			if err != nil {
				errs <- err
			}
			leases[i] = l
		}(i, m)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return leases
}

// holdMany holds n mutexes under root on c, one lease each.
func holdMany(tb testing.TB, ctx context.Context, c *zklock.Client, root string, n int) []*zklock.Lease {
	tb.Helper()
	mutexes := make([]*zklock.Mutex, n)
	for i := range mutexes {
		mutexes[i] = newMutex(tb, c, fmt.Sprintf("%s/entity-%05d", root, i))
	}
	return acquireAll(tb, ctx, mutexes)
}
