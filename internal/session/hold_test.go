package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A second Release says ErrReleased, also of a lease that was lost: the
// first said how it was lost, and only the first may act on its nodes.
func TestSecondReleaseSaysReleasedAfterALoss(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/r/a"})[0]
	must(t, f.Delete("/r/a"), "delete the held node")
	returnedWithin(t, h.Done(), "the lease of a deleted node")
	if err := h.Release(ctxT(t)); !errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("first release of a lost lease: %v, want ErrNodeDeleted", err)
	}
	err := h.Release(ctxT(t))
	if !errors.Is(err, session.ErrReleased) || errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("second release: %v, want ErrReleased alone", err)
	}

	live := hold(t, s, []string{"/r/b"})[0]
	must(t, live.Release(ctxT(t)), "release")
	if err := live.Release(ctxT(t)); !errors.Is(err, session.ErrReleased) {
		t.Fatalf("second release of a released lease: %v, want ErrReleased", err)
	}
}

// blockDeletes makes the fake hold every Delete of node until the returned
// function is called, and logs every op.
func blockDeletes(f *zkfake.Server, log *opLog, node string) (unblock func()) {
	gate := make(chan struct{})
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		log.add(op)
		if op.Name == "Delete" && len(op.Paths) == 1 && op.Paths[0] == node {
			<-gate
		}
		return nil
	}})
	return func() { close(gate) }
}

// releaseAsync releases h with ctx in the background; the channel gets its
// error, and whether ctx was still live when it returned.
type released struct {
	err      error
	ctxEnded bool
}

func releaseAsync(ctx context.Context, h *session.Hold) <-chan released {
	ch := make(chan released, 1)
	go func() {
		err := h.Release(ctx)
		ch <- released{err, ctx.Err() != nil}
	}()
	return ch
}

func awaitRelease(t *testing.T, ch <-chan released, what string) released {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(long):
		t.Fatalf("%s: Release did not return", what)
		return released{}
	}
}

// queueBehind starts the Release of each of hs, in order, each queued
// behind the delete in flight before the next starts.
func queueBehind(t *testing.T, s *session.Session, ctx context.Context, hs ...*session.Hold) []<-chan released {
	t.Helper()
	var out []<-chan released
	for i, h := range hs {
		out = append(out, releaseAsync(ctx, h))
		eventually(t, func() bool { _, n := s.ReleasesState(); return n == i+1 }, fmt.Sprintf("release %d queued", i+1))
	}
	return out
}

// When every Release queued behind a delete has left (its ctx ended), the
// one whose delete returns sends their batch itself, and marks that no
// delete is in flight: a later Release is not queued behind nothing.
func TestReleaseQueueSentWhenEveryoneLeft(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	hs := hold(t, s, []string{"/q/a"}, []string{"/q/b"}, []string{"/q/c"}, []string{"/q/d"})
	var log opLog
	unblock := blockDeletes(f, &log, "/q/a")
	first := releaseAsync(ctxT(t), hs[0])
	eventually(t, func() bool { return log.count("Delete", "/q/a") == 1 }, "the first delete in flight")

	ctx, cancel := context.WithCancel(ctxT(t))
	leaving := queueBehind(t, s, ctx, hs[1], hs[2])
	cancel()
	for i, ch := range leaving {
		must(t, awaitRelease(t, ch, "a release whose ctx ended").err, "release ", i)
	}
	if n := log.count("DeleteAll", "/q/b"); n != 0 {
		t.Fatalf("the batch went out before the delete in flight returned (%d)", n)
	}
	unblock()
	must(t, awaitRelease(t, first, "the first release").err, "the first release")
	if n := log.count("DeleteAll", "/q/b"); n != 1 {
		t.Fatalf("the batch of the Releases that left was sent %d times, want once", n)
	}
	if busy, n := s.ReleasesState(); busy || n != 0 {
		t.Fatalf("after the last delete: in flight %v, %d queued; want idle", busy, n)
	}
	r := awaitRelease(t, releaseAsync(ctxT(t), hs[3]), "a release after the queue emptied")
	must(t, r.err, "release")
	if r.ctxEnded {
		t.Fatal("a release waited for its ctx to end")
	}
	for _, n := range []string{"/q/a", "/q/b", "/q/c", "/q/d"} {
		if f.Exists(n) {
			t.Fatalf("%s outlived its release", n)
		}
	}
}

// Releases queued behind a delete go out in one multi of up to
// maxReleaseBatch (1000) nodes, exactly 1000 included; a Release that
// would take the batch past it deletes its nodes alone, at once, not when
// its ctx ends.
func TestReleaseBatchUpToMaxNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int // of the Releases queued, in order
		multi []int // the multis sent after the first delete returns, in any order
	}{
		{"exactly 1000", []int{500, 500}, []int{1000}},
		{"one past", []int{500, 501}, []int{500, 501}},
		{"the middle one left out", []int{600, 600, 1}, []int{601, 600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			s := openFake(t, f)
			hs := hold(t, s, []string{"/b/first"})
			var groups [][]string
			var covers []session.Cover
			for i, n := range tc.sizes {
				g := makeMany(t, s, fmt.Sprintf("/b/%d", i), n)
				groups = append(groups, g)
				covers = append(covers, make([]session.Cover, n)...)
			}
			for i := range covers {
				covers[i].Own = true // a lie: nothing here deletes them
			}
			hs = append(hs, grant(t, s, groups, covers)...)
			var log opLog
			unblock := blockDeletes(f, &log, "/b/first")
			first := releaseAsync(ctxT(t), hs[0])
			eventually(t, func() bool { return log.count("Delete", "/b/first") == 1 }, "the first delete in flight")
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			queued := queueBehind(t, s, ctx, hs[1:]...)
			unblock()
			must(t, awaitRelease(t, first, "the first release").err)
			for i, ch := range queued {
				r := awaitRelease(t, ch, "a queued release")
				must(t, r.err, "queued release ", i)
				if r.ctxEnded {
					t.Fatalf("queued release %d (%d nodes) returned only when its ctx ended", i, tc.sizes[i])
				}
			}
			got := map[int]int{}
			for _, n := range log.sizes("DeleteAll") {
				got[n]++
			}
			want := map[int]int{}
			for _, n := range tc.multi {
				want[n]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("multis sent, by size: %v, want %v", got, want)
			}
			for i := range tc.sizes {
				if left := f.Children(fmt.Sprintf("/b/%d", i)); len(left) != 1 { // the seed
					t.Fatalf("nodes left under /b/%d: %v", i, left)
				}
			}
		})
	}
}
