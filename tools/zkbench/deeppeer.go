package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// peerDrain is Curator's side of a drain: the Java peer's drain mode,
// driven step by step through its stdin and stdout (the protocol is at
// drain() in tools/peers/java/ZkPeer.java).
type peerDrain struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at its end
	stderr *lockedBuffer
	cancel context.CancelFunc
}

// lockedBuffer is stderr's buffer: the exec package writes it from a
// goroutine of its own while an error message may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newPeerDrain(ctx context.Context, p *peers, servers []string, path string, c deepCase) (*peerDrain, error) {
	if err := p.ensureBuilt(ctx); err != nil {
		return nil, err
	}
	// The whole drain, queueing included, within the process's life.
	pctx, cancel := context.WithTimeout(ctx, drainQueueTimeout+drainTimeout+2*time.Minute)
	cmd := exec.CommandContext(pctx, p.javaLauncher(), "drain",
		"--servers", strings.Join(servers, ","),
		"--path", path,
		"--recipe", c.Recipe,
		"--waiters", strconv.Itoa(c.Waiters),
		"--clients", strconv.Itoa(c.Clients),
		"--leases", strconv.Itoa(c.Leases),
		"--session-ms", strconv.FormatInt(scaleSessionTimeout.Milliseconds(), 10),
		"--id", "zkbench-curator")
	cmd.Dir = p.root
	d := &peerDrain{cmd: cmd, lines: make(chan string, 16), stderr: &lockedBuffer{}, cancel: cancel}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		d.stdin, err = cmd.StdinPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(d.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
	}()
	return d, nil
}

// send writes one step to the peer.
func (d *peerDrain) send(step string) error {
	_, err := io.WriteString(d.stdin, step+"\n")
	return err
}

// expect returns the peer's next line that starts with prefix; an ERR
// line, the end of its output or the timeout is an error.
func (d *peerDrain) expect(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-d.lines:
			switch {
			case !ok:
				return "", fmt.Errorf("peer ended before %q: %s", prefix, tail([]byte(d.stderr.String())))
			case strings.HasPrefix(line, "ERR "):
				return "", errors.New(line)
			case strings.HasPrefix(line, prefix):
				return line, nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
			return "", fmt.Errorf("no %q from the peer within %v", prefix, timeout)
		}
	}
}

func (d *peerDrain) hold(ctx context.Context) error {
	_, err := d.expect(ctx, "HELD ", 2*time.Minute)
	return err
}

func (d *peerDrain) queue(ctx context.Context) error {
	if err := d.send("queue"); err != nil {
		return err
	}
	_, err := d.expect(ctx, "QUEUING ", drainQueueTimeout)
	return err
}

// failed reports a peer that said anything while its waiters queue: it
// only speaks then to say it failed, or by ending.
func (d *peerDrain) failed() error {
	select {
	case line, ok := <-d.lines:
		if !ok {
			return fmt.Errorf("peer ended: %s", tail([]byte(d.stderr.String())))
		}
		return fmt.Errorf("peer said %q while queueing", line)
	default:
		return nil
	}
}

func (d *peerDrain) release(context.Context) error { return d.send("release") }

func (d *peerDrain) drained(ctx context.Context) error {
	_, err := d.expect(ctx, "DRAINED ", drainTimeout)
	return err
}

func (d *peerDrain) finish(ctx context.Context) (drainOutcome, error) {
	var out drainOutcome
	if err := d.send("finish"); err != nil {
		return out, err
	}
	line, err := d.expect(ctx, "{", 2*time.Minute)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		return out, fmt.Errorf("decode %q: %w", line, err)
	}
	return out, nil
}

// close ends the peer: EOF on its stdin makes it fail its next step and
// exit; the context kills it if it does not within a minute.
func (d *peerDrain) close() {
	_ = d.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range d.lines { // drain, so the reader ends
		}
		_ = d.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		d.cancel() // kills the process we started
		<-done
	}
	d.cancel()
}
