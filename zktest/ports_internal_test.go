package zktest

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestParsePorts(t *testing.T) {
	for in, want := range map[string]portRange{
		"30000-30999":   {30000, 30999},
		" 1 - 65535 ":   {1, 65535},
		"30000-30000":   {30000, 30000},
		"30000":         {},
		"30000-":        {},
		"a-b":           {},
		"0-10":          {},
		"10-5":          {},
		"60000-70000":   {},
		"-1-10":         {},
		"30000-30999-1": {},
	} {
		got, err := parsePorts(in)
		if want == (portRange{}) {
			if !errors.Is(err, errPorts) {
				t.Errorf("parsePorts(%q) = %v, %v; want an error wrapping errPorts", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parsePorts(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestHostPortsPrecedence(t *testing.T) {
	t.Setenv(portsEnv, "")
	if r, strict, err := hostPorts(portRange{}); err != nil || strict || r != defaultPorts {
		t.Fatalf("no setting: %v %v %v; want the defaults, not strict", r, strict, err)
	}
	t.Setenv(portsEnv, "30000-30099")
	if r, strict, err := hostPorts(portRange{}); err != nil || !strict || r != (portRange{30000, 30099}) {
		t.Fatalf("ZKTEST_PORTS: %v %v %v", r, strict, err)
	}
	if r, strict, err := hostPorts(portRange{31000, 31009}); err != nil || !strict || r != (portRange{31000, 31009}) {
		t.Fatalf("WithHostPorts over ZKTEST_PORTS: %v %v %v", r, strict, err)
	}
	t.Setenv(portsEnv, "30099-30000")
	if _, _, err := hostPorts(portRange{}); !errors.Is(err, errPorts) {
		t.Fatalf("a reversed ZKTEST_PORTS: %v; want errPorts", err)
	}
}

// A range whose every port is taken fails, naming it, instead of
// publishing the container elsewhere.
func TestFreePortStrict(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := portRange{port, port}
	if got, err := freePort(r, true); err == nil {
		t.Fatalf("freePort(%v) = %d with the port taken", r, got)
	} else if want := "no free port in " + strconv.Itoa(port) + "-" + strconv.Itoa(port); err.Error() != want {
		t.Fatalf("error %q; want %q", err, want)
	}
	if got, err := freePort(r, false); err != nil || got == port {
		t.Fatalf("not strict: %d, %v; want another free port", got, err)
	}
}
