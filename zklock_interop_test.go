package zklock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// go-zookeeper's own zk.Lock writes `_c_<32 hex>-lock-<seq>` nodes. zklock
// reads them as exclusive nodes, and zk.Lock orders zklock's mutex nodes by
// their sequence, so a service can move from zk.Lock to zklock one instance
// at a time: on one path the two exclude each other, first come first
// served.
func TestZkLockAndMutexExcludeEachOther(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	zl := zk.NewLock(connect(t).Conn(), path, zk.WorldACL(zk.PermAll))
	m := newMutex(t, connect(t), path)

	// zk.Lock holds: zklock neither takes the lock nor waits out of turn.
	must(t, zl.Lock(), "zk.Lock")
	_, err := m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "TryAcquire while zk.Lock holds")
	parts, err := m.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 1 || !parts[0].Holder {
		t.Fatalf("participants %+v: want zk.Lock's node, holding", parts)
	}
	w := async(m.Acquire, ctxT(t))
	queued(t, c, path, 2)
	pending(t, w)
	must(t, zl.Unlock(), "zk.Unlock")
	l := await(t, w)

	// zklock holds: zk.Lock waits for it.
	locked := make(chan error, 1)
	go func() { locked <- zl.Lock() }()
	queued(t, c, path, 2)
	select {
	case err := <-locked:
		t.Fatalf("zk.Lock returned while zklock holds: %v", err)
	default:
	}
	release(t, l)
	select {
	case err := <-locked:
		must(t, err, "zk.Lock after zklock released")
	case <-ctxT(t).Done():
		t.Fatal("zk.Lock did not get the lock after zklock released it")
	}
	must(t, zl.Unlock())
}

// Many holders of both libraries on one path: never two at once.
func TestZkLockAndMutexContend(t *testing.T) {
	t.Parallel()
	const each, cycles = 3, 15
	path := lockPath(t)
	var inside, violations, holds atomic.Int32
	enter := func() {
		if inside.Add(1) != 1 {
			violations.Add(1)
		}
		holds.Add(1)
		time.Sleep(time.Millisecond) // hold a little, so that an overlap would show
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for i := 0; i < each; i++ {
		zl := zk.NewLock(connect(t).Conn(), path, zk.WorldACL(zk.PermAll))
		m := newMutex(t, connect(t), path)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				if err := zl.Lock(); err != nil {
					t.Error(err)
					return
				}
				enter()
				if err := zl.Unlock(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				err := zklock.Do(ctxT(t), m, func(context.Context) error { enter(); return nil })
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d times two holders at once", v)
	}
	if h := holds.Load(); h != 2*each*cycles {
		t.Fatalf("%d holds, want %d", h, 2*each*cycles)
	}
}
