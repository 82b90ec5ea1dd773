package zktest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go/wait"
)

// FourLetter sends a four-letter command (srvr, mntr, wchs, cons, ruok, ...)
// to the ZooKeeper server at addr ("host:port") and returns its answer. ctx
// bounds the whole exchange: a paused server never answers. The server must
// allow the command (4lw.commands.whitelist); zktest's containers allow all.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	var d net.Dialer
	return fourLetter(ctx, addr, cmd, d.DialContext)
}

// fourLetter is FourLetter over the connections of dial.
func fourLetter(ctx context.Context, addr, cmd string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (string, error) {
	if len(cmd) != 4 {
		return "", fmt.Errorf("zktest: four-letter command %q: not four letters", cmd)
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	// Unblock the read when ctx ends: a paused server never answers.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	if _, err = io.WriteString(conn, cmd); err == nil {
		var out []byte
		if out, err = io.ReadAll(conn); err == nil {
			return string(out), nil
		}
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
}

// serving is the wait strategy of zktest's containers: the server answers
// srvr on the published endpoint. Probing from the host, rather than waiting
// for a log line, tests what clients need (the port binding included) and
// does not depend on the image's log format.
type serving struct {
	addr    string
	timeout time.Duration
	tls     *tls.Config // the probe's, for a server WithTLS
}

// fourLetter asks the server, over TLS if it speaks it.
func (s *serving) fourLetter(ctx context.Context, cmd string) (string, error) {
	if s.tls != nil {
		return fourLetterTLS(ctx, s.addr, cmd, s.tls)
	}
	return FourLetter(ctx, s.addr, cmd)
}

var _ wait.Strategy = (*serving)(nil)

func (s *serving) String() string { return "srvr answering on " + s.addr }

// WaitUntilReady implements [wait.Strategy].
func (s *serving) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()

	var last error
	for {
		state, err := target.State(ctx)
		if err == nil && (state.Status == container.StateExited || state.Status == container.StateDead) {
			return fmt.Errorf("zktest: container %s (exit code %d) before serving on %s%s",
				state.Status, state.ExitCode, s.addr, logTail(target))
		}
		probe, cancelProbe := context.WithTimeout(ctx, time.Second)
		out, err := s.fourLetter(probe, "srvr")
		cancelProbe()
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("srvr answered %q", strings.TrimSpace(out))
		}
		last = err

		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: not serving on %s (waited up to %v): %w%s",
				s.addr, s.timeout, errors.Join(ctx.Err(), last), logTail(target))
		case <-ticker.C:
		}
	}
}

// logTail returns the last lines of the container's log, for error messages:
// a server that fails to start says why there.
func logTail(target wait.StrategyTarget) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := target.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	const keep = 20
	var lines []string
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > keep {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\ncontainer log (last lines):\n\t" + strings.Join(lines, "\n\t")
}
