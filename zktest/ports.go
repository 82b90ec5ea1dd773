package zktest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// portsEnv names the environment variable that sets the host ports
// containers' client ports are published on, as "low-high" (see
// [WithHostPorts]).
const portsEnv = "ZKTEST_PORTS"

// defaultPorts are the host ports chosen from when neither [WithHostPorts]
// nor ZKTEST_PORTS says: below the usual ephemeral ranges (Linux starts at
// 32768), which the kernel never hands to outgoing connections, so a port
// stays free while its container is stopped.
var defaultPorts = portRange{20000, 31999}

// portRange is a range of host ports, both ends included; the zero value
// means none was set.
type portRange struct{ lo, hi int }

func (r portRange) String() string { return fmt.Sprintf("%d-%d", r.lo, r.hi) }

// WithHostPorts makes [Run] publish the container's client port on a host
// port between low and high, both included, chosen at random among those
// free, for a host where other ports are reserved (a shared CI machine).
// It takes precedence over the ZKTEST_PORTS environment variable, which
// sets the same for every container of the process, as "low-high" (for
// example ZKTEST_PORTS=30000-30999). Without either, ports are chosen in
// 20000-31999, below the kernel's ephemeral range, and any free port if
// none there is. A range that is empty, reversed or outside 1-65535 makes
// [Run] fail before anything is started; so does a range with no free
// port, naming it. Each container takes one port of the range (an
// [Ensemble], one per server), kept across Stop and Start.
func WithHostPorts(low, high int) Option {
	return func(o *options) error {
		r := portRange{low, high}
		if err := r.check(); err != nil {
			return fmt.Errorf("host ports %d-%d: %w", low, high, err)
		}
		o.ports = r
		return nil
	}
}

// errPorts is what a bad range of host ports wraps.
var errPorts = errors.New("want low-high, with 1 <= low <= high <= 65535")

func (r portRange) check() error {
	if r.lo < 1 || r.hi > 65535 || r.lo > r.hi {
		return errPorts
	}
	return nil
}

// parsePorts reads a range of host ports written "low-high".
func parsePorts(s string) (portRange, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return portRange{}, errPorts
	}
	var r portRange
	var err1, err2 error
	r.lo, err1 = strconv.Atoi(strings.TrimSpace(lo))
	r.hi, err2 = strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return portRange{}, errPorts
	}
	return r, r.check()
}

// hostPorts returns the ports to choose from: set's, if set, else
// ZKTEST_PORTS's, else the defaults. It fails on a bad ZKTEST_PORTS.
func hostPorts(set portRange) (r portRange, userSet bool, err error) {
	if set != (portRange{}) {
		return set, true, nil
	}
	env := os.Getenv(portsEnv)
	if env == "" {
		return defaultPorts, false, nil
	}
	r, err = parsePorts(env)
	if err != nil {
		return portRange{}, false, fmt.Errorf("zktest: %s=%q: %w", portsEnv, env, err)
	}
	return r, true, nil
}

// freePort returns a port of r that is free on 127.0.0.1 now, and not
// handed out before in this process: random ones first, then each in
// turn. If strict is false (r is the default) and none is, any free port.
func freePort(r portRange, strict bool) (int, error) {
	usedPorts.Lock()
	defer usedPorts.Unlock()
	if usedPorts.m == nil {
		usedPorts.m = make(map[int]bool)
	}
	n := r.hi - r.lo + 1
	for range min(50, n) {
		if port, err := tryPort(r.lo + rand.IntN(n)); err == nil {
			return port, nil
		}
	}
	for port := r.lo; port <= r.hi; port++ {
		if port, err := tryPort(port); err == nil {
			return port, nil
		}
	}
	if strict {
		return 0, fmt.Errorf("no free port in %s", r)
	}
	var err error
	for range 10 {
		var port int
		if port, err = tryPort(0); err == nil {
			return port, nil
		}
	}
	return 0, err
}

// tryPort takes port (0: any) if it is free on 127.0.0.1 and not handed
// out before. usedPorts is held.
func tryPort(port int) (int, error) {
	l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	port = l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	if usedPorts.m[port] {
		return 0, errors.New("port handed out already")
	}
	usedPorts.m[port] = true
	return port, nil
}
