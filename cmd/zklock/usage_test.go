//go:build linux

package main

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestUsageErrors: what the operator got wrong is a usage error (125)
// that says what to do, found before any connection is tried.
func TestUsageErrors(t *testing.T) {
	// A listener stands in for ZooKeeper: it must see no connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := []string{"PATH=" + os.Getenv("PATH"), "GORACE=" + os.Getenv("GORACE")}
	environ := append(base, "ZKLOCK_SERVERS="+ln.Addr().String())
	// A file that holds no PEM at all, for the TLS flags.
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command at all", nil, "Usage:"},
		{"unknown subcommand", []string{"lokc", "/a"}, `unknown command "lokc"`},
		{"unknown subcommand after a global flag", []string{"-v", "lokc", "/a"}, `unknown command "lokc"`},
		{"a command's flag before the command", []string{"-timeout", "5s", "lock", "/a", "--", "true"}, "only the connection flags"},
		{"bad auth before the command", []string{"-auth", "userpass", "ls", "/a"}, "scheme:credentials"},
		{"global flags and no command", []string{"-servers", "a:1"}, "missing the command"},
		{"relative path", []string{"lock", "relative", "--", "true"}, `"relative" is relative`},
		{"path under /zookeeper", []string{"ls", "/zookeeper/quota"}, "reserves"},
		{"missing path", []string{"lock"}, "missing PATH"},
		{"missing --", []string{"lock", "/a", "true"}, "missing -- before the command"},
		{"missing command", []string{"lock", "/a", "--"}, "missing the command"},
		{"elect missing command", []string{"elect", "/a"}, "missing the command"},
		{"semaphore 0", []string{"lock", "-semaphore", "0", "/a", "--", "true"}, "-semaphore 0"},
		{"n above max", []string{"lock", "-semaphore", "2", "-n", "3", "/a", "--", "true"}, "-n 3 is out of range"},
		{"n without semaphore", []string{"lock", "-n", "2", "/a", "--", "true"}, "needs -semaphore"},
		{"read and write", []string{"lock", "-read", "-write", "/a", "--", "true"}, "exclude each other"},
		{"bad duration", []string{"lock", "-timeout", "soon", "/a", "--", "true"}, "invalid value"},
		{"unknown flag", []string{"lock", "-wait", "/a", "--", "true"}, "not defined: -wait"},
		{"bad auth", []string{"lock", "-auth", "userpass", "/a", "--", "true"}, "scheme:credentials"},
		{"bad session timeout", []string{"lock", "-session-timeout", "0s", "/a", "--", "true"}, "-session-timeout"},
		{"empty server", []string{"lock", "-servers", "a:1,,b:2", "/a", "--", "true"}, "empty entry"},
		{"empty identity", []string{"elect", "-data=", "/a", "--", "true"}, "-data is empty"},
		{"ls with a command", []string{"ls", "/a", "--", "true"}, "runs no command"},
		{"ls of two paths", []string{"ls", "/a", "/b"}, "one PATH"},
		{"bad layout", []string{"lock", "-semaphore", "2", "-layout", "zookeeper", "/a", "--", "true"}, `-layout "zookeeper" is none of zklock, curator and kazoo`},
		{"layout without semaphore", []string{"lock", "-layout", "curator", "/a", "--", "true"}, "-layout curator needs -semaphore"},
		{"kazoo takes one lease", []string{"lock", "-semaphore", "3", "-n", "2", "-layout", "kazoo", "/a", "--", "true"}, "one lease at a time"},
		{"ls max depth", []string{"ls", "-max-depth", "0", "/a"}, "-max-depth 0 must be at least 1"},
		{"ls max nodes", []string{"ls", "-max-nodes", "-1", "/a"}, "-max-nodes -1 must be at least 1"},
		{"ls -watch of the root", []string{"ls", "-watch", "/"}, "is the root"},
		{"tls cert without key", []string{"lock", "-tls-cert", junk, "/a", "--", "true"}, "-tls-cert needs -tls-key"},
		{"tls key without cert", []string{"lock", "-tls-key", junk, "/a", "--", "true"}, "-tls-key needs -tls-cert"},
		{"tls ca missing", []string{"lock", "-tls-ca", missing, "/a", "--", "true"}, "-tls-ca: open " + missing + ": no such file"},
		{"tls ca without certificates", []string{"ls", "-tls-ca", junk, "/a"}, "-tls-ca " + junk + ": no PEM certificate"},
		{"tls cert missing", []string{"lock", "-tls-cert", missing, "-tls-key", junk, "/a", "--", "true"}, "-tls-cert " + missing + ", -tls-key " + junk + ": open " + missing},
		{"tls cert not PEM", []string{"elect", "-tls-cert", junk, "-tls-key", junk, "/a", "--", "true"}, "failed to find any PEM data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr := expectCode(t, exitFailed, environ, tc.args...)
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr)
			}
			if len(tc.args) > 0 && !strings.Contains(stderr, "for usage") {
				t.Errorf("stderr does not point to the usage:\n%s", stderr)
			}
		})
	}

	t.Run("no servers", func(t *testing.T) {
		_, stderr := expectCode(t, exitFailed, base, "lock", "/a", "--", "true")
		if !strings.Contains(stderr, "set ZKLOCK_SERVERS") || !strings.Contains(stderr, "-servers") {
			t.Errorf("stderr does not say how to name the servers:\n%s", stderr)
		}
	})

	// Every zklock above has exited: a connection it made would wait in
	// the listener's backlog now.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if conn, err := ln.Accept(); err == nil {
		conn.Close()
		t.Errorf("a zklock with a usage error connected to the server")
	}
}

// TestHelp: help is on stdout, exits 0, and shows an example.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}, {"help", "lock"}, {"lock", "-h"}, {"elect", "-h"}, {"ls", "-help"}, {"help", "ls"}} {
		stdout, _ := expectCode(t, 0, env(), args...)
		if !strings.Contains(stdout, "Usage") || !strings.Contains(stdout, "Example") {
			t.Errorf("zklock %q shows no usage with an example:\n%s", args, stdout)
		}
		if args[0] != "ls" && args[len(args)-1] != "ls" && !strings.Contains(stdout, "124") {
			t.Errorf("zklock %q shows no exit statuses:\n%s", args, stdout)
		}
	}
	// help CMD prints what CMD -h does: the text and the flags.
	for _, args := range [][]string{{"lock", "-h"}, {"help", "lock"}} {
		stdout, _ := expectCode(t, 0, env(), args...)
		for _, want := range []string{"ZKLOCK_SERVERS=zk1:2181 zklock lock /jobs/backup -- /usr/local/bin/backup.sh",
			"Flags:", "-servers", "-semaphore", "-layout", "-layout curator", "-grace", "-timeout", "connecting included", "ZKLOCK_TOKEN", "127",
			"-tls-ca FILE", "-tls-cert FILE", "-tls-key FILE"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("zklock %q does not show %q:\n%s", args, want, stdout)
			}
		}
	}
	for sub, flags := range map[string][]string{
		"elect": {"-data", "-timeout"}, "ls": {"-watch", "-json", "-max-depth", "-max-nodes", "122"},
		"observe": {"-election", "-json", "-servers"},
	} {
		stdout, _ := expectCode(t, 0, env(), "help", sub)
		for _, want := range append([]string{"Usage: zklock " + sub, "Flags:"}, flags...) {
			if !strings.Contains(stdout, want) {
				t.Errorf("zklock help %s does not show %q:\n%s", sub, want, stdout)
			}
		}
	}
	stdout, _ := expectCode(t, 0, env(), "help")
	if !strings.Contains(stdout, "-tls-cert") || !strings.Contains(stdout, "x509 ACLs") {
		t.Errorf("zklock help does not say how to connect over TLS:\n%s", stdout)
	}
	for _, sub := range []string{"lock", "elect", "ls", "observe", "version", "help"} {
		if !strings.Contains(stdout, "\n  zklock "+sub+" ") {
			t.Errorf("zklock help does not list %s:\n%s", sub, stdout)
		}
	}
	_, stderr := expectCode(t, exitFailed, env(), "help", "lokc")
	if !strings.Contains(stderr, "observe and version") {
		t.Errorf("zklock help of an unknown command does not list the commands:\n%s", stderr)
	}
}

// TestVersion: version prints the module version ("(devel)" in a build
// from a checkout), the Go version and the platform, on one line.
func TestVersion(t *testing.T) {
	stdout, _ := expectCode(t, 0, env(), "version")
	re := regexp.MustCompile(`^zklock (v\S+|\(devel\)( [0-9a-f]{12}(\+dirty)?)?) go1\.\S+ ` + runtime.GOOS + "/" + runtime.GOARCH + "\n$")
	if !re.MatchString(stdout) {
		t.Errorf("zklock version printed %q, want a match of %s", stdout, re)
	}
	if _, stderr := expectCode(t, exitFailed, env(), "version", "extra"); !strings.Contains(stderr, "no arguments") {
		t.Errorf("zklock version extra: stderr does not say version takes no arguments:\n%s", stderr)
	}
}

// TestTimeoutBoundsConnecting: -timeout bounds connecting too. Nothing
// listens on port 1: the library keeps trying until -timeout passes (well
// before -connect-timeout's 15s), then zklock fails for want of a
// connection (125), naming the server and why it refused.
func TestTimeoutBoundsConnecting(t *testing.T) {
	for _, args := range [][]string{
		{"lock", "-timeout", "2s", "-servers", "127.0.0.1:1", "/a", "--", "true"},
		{"elect", "-timeout", "2s", "-servers", "127.0.0.1:1", "/a", "--", "true"},
		{"ls", "-timeout", "2s", "-servers", "127.0.0.1:1", "/a"},
		{"ls", "-watch", "-timeout", "2s", "-servers", "127.0.0.1:1", "/a"},
	} {
		_, stderr := expectCode(t, exitFailed, env(), args...)
		for _, want := range []string{"within -timeout 2s", "127.0.0.1:1", "connection refused"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("zklock %q: stderr does not say %q:\n%s", args, want, stderr)
			}
		}
		if strings.Contains(stderr, "zklock: ") {
			t.Errorf("zklock %q: stderr has the library's prefix after the command's:\n%s", args, stderr)
		}
	}
}

// TestStillConnecting: ls and observe say on stderr, within a few seconds,
// that they are still connecting, naming the servers, rather than being
// silent until they give up. Nothing listens on port 1.
func TestStillConnecting(t *testing.T) {
	for _, args := range [][]string{
		{"ls", "-timeout", "6s", "-servers", "127.0.0.1:1", "/a"},
		{"observe", "-connect-timeout", "6s", "-servers", "127.0.0.1:1", "/a"},
	} {
		_, stderr := expectCode(t, exitFailed, env(), args...)
		re := regexp.MustCompile(`(?m)^zklock ` + args[0] + `: still connecting to 127\.0\.0\.1:1 \([2-5]s\)\.\.\.$`)
		if !re.MatchString(stderr) {
			t.Errorf("zklock %q: stderr does not say it is still connecting (%s):\n%s", args, re, stderr)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		pos, command   []string
		dashdash, read bool
	}{
		{[]string{"-read", "/a", "--", "cmd", "-x"}, []string{"/a"}, []string{"cmd", "-x"}, true, true},
		{[]string{"/a", "-read", "--", "cmd"}, []string{"/a"}, []string{"cmd"}, true, true},
		{[]string{"/a", "cmd", "--", "--"}, []string{"/a", "cmd"}, []string{"--"}, true, false},
		{[]string{"/a"}, []string{"/a"}, nil, false, false},
		{[]string{"/a", "--"}, []string{"/a"}, []string{}, true, false},
	} {
		fs := newFlagSet("test")
		read := fs.Bool("read", false, "")
		pos, command, dashdash, err := parseArgs(fs, tc.args)
		if err != nil || !reflect.DeepEqual(pos, tc.pos) || !reflect.DeepEqual(command, tc.command) ||
			dashdash != tc.dashdash || *read != tc.read {
			t.Errorf("parseArgs(%q) = %q, %q, %v, read %v, %v; want %q, %q, %v, read %v",
				tc.args, pos, command, dashdash, *read, err, tc.pos, tc.command, tc.dashdash, tc.read)
		}
	}
	if _, _, _, err := parseArgs(newFlagSet("test"), []string{"-h"}); err != flag.ErrHelp {
		t.Errorf("parseArgs(-h) = %v, want flag.ErrHelp", err)
	}
}

func TestFormatAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		1400 * time.Millisecond:               "1s",
		59*time.Second + 600*time.Millisecond: "1m0s",
		2*time.Minute + 10*time.Second:        "2m10s",
		3*time.Hour + 4*time.Minute + 59*time.Second: "3h4m",
		50 * time.Hour: "2d2h",
	} {
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestShowData(t *testing.T) {
	for data, want := range map[string]string{
		"host/42":     "host/42",
		"a b":         "a b",
		"":            `""`,
		"tab\there":   `"tab\there"`,
		"\xff\x00":    `"\xff\x00"`,
		`"quoted"`:    `"\"quoted\""`,
		"héllo wörld": "héllo wörld",
	} {
		if got := showData([]byte(data)); got != want {
			t.Errorf("showData(%q) = %s, want %s", data, got, want)
		}
	}
}
