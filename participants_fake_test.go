package zklock_test

import (
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A holder that leaves between Participants' listing of the children and
// its read of the holder's node is left out, and its successor is shown
// holding: who holds is decided over the nodes found, not the names
// listed (which showed the successor waiting behind a node no longer
// shown, and nobody holding).
func TestFakeParticipantsHolderGoneBetweenReads(t *testing.T) {
	f := zkfake.New()
	_, _, ma, mb := fakeMutexes(t, f, "/pg")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	rb := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/pg", 2)
	pending(t, rb)

	obs := fakeClient(t, f)
	conn := connOf(t, f, obs)
	var deleted atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Get" && op.Paths[0] == la.Node() && deleted.CompareAndSwap(false, true) {
			must(t, f.Delete(la.Node())) // the holder's node goes: its session's end, say
		}
		return nil
	}})
	ps, err := zklock.Participants(ctxT(t), obs, "/pg")
	must(t, err)
	if !deleted.Load() {
		t.Fatal("Participants did not read the holder's node")
	}
	if len(ps) != 1 || !ps[0].Holder || ps[0].Node == la.Node() {
		t.Fatalf("participants %+v; want one, the waiter, holding, once the holder's node is gone", ps)
	}
	f.SetHooks(zkfake.Hooks{})
	release(t, await(t, rb))
}
