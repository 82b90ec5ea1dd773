package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// fakeClient opens a Client on the in-memory ZooKeeper f: the real Session
// and engine, no network.
func fakeClient(t testing.TB, f *zkfake.Server, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{"zkfake"}, append([]zklock.Option{zklock.WithFakeForTest(f)}, opts...)...)
	must(t, err, "connect to the fake")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestFakeMutexSmoke(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/a/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err, "acquire")
	t.Log(l.Node(), l.Token(), f.Nodes())
	must(t, l.Release(ctxT(t)))
}
