package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// pausedHolderEnv makes the test binary a lock holder for
// TestPausedHolderSeesLossFirst: it names the lock path.
const pausedHolderEnv = "ZKLOCK_TEST_PAUSED_HOLDER"

const pausedSession = 4 * time.Second

// A holder paused past its session (SIGSTOP, as a long GC pause or a frozen
// VM would) while a rival takes the lock must see the loss on its very first
// look after it resumes: Lease.Err and Do's ctx.Err compare the clock with
// the lease's deadline themselves, before any event or goroutine has told
// them anything.
func TestPausedHolderSeesLossFirst(t *testing.T) {
	if path := os.Getenv(pausedHolderEnv); path != "" {
		pausedHolder(t, path)
		return
	}
	t.Parallel()
	path := lockPath(t)
	child := exec.Command(os.Args[0], "-test.run=^TestPausedHolderSeesLossFirst$", "-test.v")
	child.Env = append(os.Environ(), pausedHolderEnv+"="+path)
	out, err := child.StdoutPipe()
	must(t, err)
	child.Stderr = os.Stderr
	must(t, child.Start(), "start the holder")
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expect := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the holder exited before saying %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return strings.TrimPrefix(l, prefix)
				}
			case <-time.After(long):
				t.Fatalf("the holder did not say %q", prefix)
			}
		}
	}
	expect("holding ")

	must(t, child.Process.Signal(syscall.SIGSTOP), "pause the holder")
	stopped := time.Now()
	rival := newMutex(t, connect(t), path)
	l, err := rival.Acquire(ctxT(t)) // once the paused holder's session has expired
	must(t, err, "the rival acquires")
	// The pause is the fault under test: make it last a session timeout at
	// least (the rival may get in sooner, if the holder's last packet was
	// well before the stop), so the holder knows it was paused.
	time.Sleep(time.Until(stopped.Add(pausedSession)))
	must(t, child.Process.Signal(syscall.SIGCONT), "resume the holder")

	report := expect("resumed ")
	if report != "Err=lost ctx=lost" {
		t.Fatalf("the holder's first looks after resuming: %s; want both to report the loss", report)
	}
	release(t, l)
}

// pausedHolder is the child's side: hold the lock in Do and spin, checking
// the lease and the context, until a jump of the clock shows a pause; then
// report what the first look at each said.
func pausedHolder(t *testing.T, path string) {
	c, err := zklock.Connect(ctxT(t), servers(t), zklock.WithSessionTimeout(pausedSession))
	must(t, err)
	defer c.Close()
	m, err := zklock.NewMutex(c, path)
	must(t, err)
	var lease *zklock.Lease
	look := func(err error) string {
		if err != nil {
			return "lost"
		}
		return "live"
	}
	err = zklock.Do(ctxT(t), lockerFunc(func(ctx context.Context) (*zklock.Lease, error) {
		l, err := m.Acquire(ctx)
		lease = l
		return l, err
	}), func(ctx context.Context) error {
		// The pause lasts until the server has expired the session, about
		// pausedSession after the holder's last packet; the loop itself
		// never stalls for half of that. A look that began after the pause
		// is the one that counts; one the pause fell in the middle of
		// proves nothing (it may have read the clock before), so the next
		// look counts then.
		const pause = pausedSession / 2
		end, after := time.Now(), false // before the parent can know we hold, and pause us
		fmt.Printf("holding %d\n", lease.Token())
		for {
			begin := time.Now()
			e, ce := lease.Err(), ctx.Err()
			now := time.Now()
			switch {
			case after || begin.Sub(end) > pause:
				fmt.Printf("resumed Err=%s ctx=%s\n", look(e), look(ce))
				return nil
			case now.Sub(begin) > pause:
				after = true // paused during this look: the next one is the first
			case e != nil:
				fmt.Printf("resumed lost before any pause: %v\n", e)
				return nil
			}
			end = now
			time.Sleep(time.Millisecond) // a worker's pace, not a wait for anything
		}
	})
	if err != nil && !errors.Is(err, zklock.ErrLeaseExpired) {
		t.Fatal(err)
	}
}

// lockerFunc adapts an acquire function to zklock.Locker.
type lockerFunc func(ctx context.Context) (*zklock.Lease, error)

func (f lockerFunc) Acquire(ctx context.Context) (*zklock.Lease, error)    { return f(ctx) }
func (f lockerFunc) TryAcquire(ctx context.Context) (*zklock.Lease, error) { return f(ctx) }
