package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// DefaultImage is the ZooKeeper image [Image] returns when the
// ZKLOCK_ZK_IMAGE environment variable is empty.
const DefaultImage = "zookeeper:3.9"

const (
	imageEnv   = "ZKLOCK_ZK_IMAGE"
	serversEnv = "ZKLOCK_TEST_SERVERS"

	clientPort = "2181/tcp"
	confPath   = "/conf/zoo.cfg"

	// Label put on every container zktest starts, so that leftovers of a
	// killed test binary can be found.
	labelKey = "org.zkrecipes.zktest"

	defaultTickTime   = 200 * time.Millisecond
	minMaxSessionTime = 30 * time.Second
	startupTimeout    = 60 * time.Second
	// Attempts at creating a container when the chosen host port was taken
	// between the check and Docker's bind.
	portAttempts = 3
)

// Image returns the ZooKeeper image for tests: the value of the
// ZKLOCK_ZK_IMAGE environment variable, or [DefaultImage] when it is empty.
// [Start], [Servers] and [StartEnsemble] run it; pass it to [Run] and
// [RunEnsemble] to do the same.
func Image() string {
	if image := os.Getenv(imageEnv); image != "" {
		return image
	}
	return DefaultImage
}

// Option is one of zktest's own options for [Run] and [RunEnsemble]. It is
// a testcontainers.ContainerCustomizer, so it goes in the same list as
// testcontainers' options, in any order.
type Option func(*options) error

// Customize does nothing: [Run] reads its Options before it builds the
// container request. It makes Option a testcontainers.ContainerCustomizer.
func (Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

var _ testcontainers.ContainerCustomizer = Option(nil)

type options struct {
	tickTime time.Duration
	config   [][2]string // extra zoo.cfg entries, in order
	tls      bool        // WithTLS
	ports    portRange   // WithHostPorts; zero: ZKTEST_PORTS or the defaults (ports.go)
}

// WithTickTime sets ZooKeeper's tickTime, the unit of its timeouts. The
// default is 200ms, so the minimum session timeout (two ticks) is 400ms and a
// test can see a session expire in about a second. The value is rounded down
// to whole milliseconds; [Run] rejects a tick shorter than one millisecond.
func WithTickTime(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond {
			return fmt.Errorf("tick time %v: must be at least 1ms", d)
		}
		o.tickTime = d
		return nil
	}
}

// WithConfig sets one zoo.cfg entry, key=value. It replaces zktest's own value
// for the same key, and a later WithConfig for a key replaces an earlier one.
// The readiness check sends srvr, so a 4lw.commands.whitelist that leaves srvr
// out makes [Run] time out. [Run] rejects a key that is empty or holds '=' or
// a line break, and a value that holds a line break.
func WithConfig(key, value string) Option {
	return func(o *options) error {
		if key == "" || strings.ContainsAny(key, "=\r\n") || strings.ContainsAny(value, "\r\n") {
			return fmt.Errorf("config entry %q=%q: invalid key or value", key, value)
		}
		for i, kv := range o.config {
			if kv[0] == key {
				o.config[i][1] = value
				return nil
			}
		}
		o.config = append(o.config, [2]string{key, value})
		return nil
	}
}

// Container is a ZooKeeper server running in a Docker container, started by
// [Run] or [Start]. It embeds the testcontainers.Container, so
// testcontainers.CleanupContainer and testcontainers.TerminateContainer take
// it, and its Start, Stop, Logs, Exec and the rest are testcontainers'. Its
// methods are safe for concurrent use, but pausing, stopping and starting the
// same container from several goroutines at once leaves it in whichever state
// the engine applied last.
//
// Stop keeps the data directory, and the sessions of clients that reconnect
// within their timeout after Start. Start waits, like [Run], until the server
// answers srvr, on the same [Container.ClientEndpoint]. A client that
// connects while the server starts can get a connection the server never
// answers nor closes (ZOOKEEPER-5051); give plain go-zookeeper clients
// [HandshakeDialer], or go-zookeeper waits out their sessions on it.
type Container struct {
	testcontainers.Container
	endpoint string
	ready    *serving
	tls      *authority // WithTLS; nil for plaintext
}

// Run starts a ZooKeeper container from img, an image that behaves like the
// official "zookeeper" image (see [Image]), and waits, for up to a minute,
// until the server answers srvr. ctx bounds the whole start, including
// pulling the image.
//
// opts are zktest's [Option]s and any testcontainers.ContainerCustomizer:
// environment variables, log consumers, networks, another wait strategy.
// They apply after zktest's defaults, so they win; the one exception is the
// client port's fixed 127.0.0.1 binding, which is always kept, since
// [Container.ClientEndpoint] depends on it.
//
// Run first checks that the Docker engine answers: without one it fails at
// once with an error that says so and how to fix it (start the engine, or
// set DOCKER_HOST to one that runs). An image that the engine does not have
// and cannot pull fails with an error that names ZKLOCK_ZK_IMAGE (see
// [Image]); testcontainers' reaper (Ryuk) that cannot start, offline say,
// with one that names TESTCONTAINERS_RYUK_DISABLED=true.
// On failure Run returns an error and, if a container was created, that
// container too, so the caller can still terminate it, as testcontainers'
// modules do:
//
//	c, err := zktest.Run(ctx, zktest.Image())
//	defer testcontainers.TerminateContainer(c) // nil-safe
//	if err != nil { ... }
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Container, error) {
	settings, err := configOf(opts)
	if err != nil {
		return nil, err
	}
	var ca *authority
	if settings.tls {
		if ca, err = newAuthority(); err != nil {
			return nil, fmt.Errorf("zktest: make the TLS certificates: %w", err)
		}
	}
	ports, strict, err := hostPorts(settings.ports)
	if err != nil {
		return nil, err
	}
	if err := checkDocker(ctx); err != nil {
		return nil, err
	}

	for attempt := 1; ; attempt++ {
		port, err := freePort(ports, strict)
		if err != nil {
			return nil, fmt.Errorf("zktest: choose a host port: %w", err)
		}
		c, err := run(ctx, img, zooCfg(&settings), ca, port, opts)
		if err == nil || attempt == portAttempts || !portTaken(err) {
			return c, err
		}
		// Another process bound the port after freePort checked it.
		if terr := c.Terminate(context.WithoutCancel(ctx)); terr != nil {
			return c, errors.Join(err, terr)
		}
	}
}

// dockerCheckTimeout bounds the ping of the Docker engine.
const dockerCheckTimeout = 10 * time.Second

// checkDocker pings the Docker engine that containers will be started on,
// so that a missing engine is reported as what it is, with the fix,
// rather than as whatever testcontainers failed at last while looking for
// one (often "rootless Docker not found"). DOCKER_HOST, when set, names
// the engine: testcontainers would try other places after it, but a
// DOCKER_HOST that does not answer is a mistake to report, not to work
// around. Otherwise testcontainers finds the engine as it always does
// (~/.testcontainers.properties, the Docker context, /var/run/docker.sock,
// rootless sockets). The error wraps the engine client's.
func checkDocker(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dockerCheckTimeout)
	defer cancel()
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		cli, err := client.New(client.FromEnv)
		if err == nil {
			_, err = cli.Ping(ctx, client.PingOptions{})
			cli.Close()
		}
		if err != nil {
			return fmt.Errorf("zktest: Docker is not reachable at DOCKER_HOST=%s: start the Docker engine there, "+
				"or set DOCKER_HOST to an engine that runs (unset, it means unix:///var/run/docker.sock): %w", host, err)
		}
		return nil
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{})
		cli.Close()
	}
	if err != nil {
		return fmt.Errorf("zktest: no Docker engine is reachable: start one (dockerd, `systemctl start docker`, Docker Desktop), "+
			"or set DOCKER_HOST to one that runs (e.g. unix:///var/run/docker.sock, tcp://host:2375): %w", err)
	}
	return nil
}

// configOf applies zktest's Options among opts over the defaults.
func configOf(opts []testcontainers.ContainerCustomizer) (options, error) {
	settings := options{tickTime: defaultTickTime}
	for _, opt := range opts {
		if o, ok := opt.(Option); ok && o != nil {
			if err := o(&settings); err != nil {
				return settings, fmt.Errorf("zktest: %w", err)
			}
		}
	}
	return settings, nil
}

// run starts a container with zoo.cfg cfg, serving TLS if ca is set.
func run(ctx context.Context, img, cfg string, ca *authority, port int, opts []testcontainers.ContainerCustomizer) (*Container, error) {
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ready := &serving{addr: endpoint, timeout: startupTimeout}
	files := []testcontainers.ContainerFile{{
		Reader:            strings.NewReader(cfg),
		ContainerFilePath: confPath,
		FileMode:          0o644,
	}}
	if ca != nil {
		ready.tls = ca.probe
		// Readable by the server's user: the official image's runs as
		// zookeeper, and the key is a test's throwaway.
		files = append(files,
			testcontainers.ContainerFile{Reader: bytes.NewReader(ca.server), ContainerFilePath: tlsServerPath, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(ca.caPEM), ContainerFilePath: tlsCAPath, FileMode: 0o644})
	}

	moduleOpts := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(clientPort),
		testcontainers.WithFiles(files...),
		testcontainers.WithLabels(map[string]string{labelKey: "true"}),
		testcontainers.WithWaitStrategy(ready),
		testcontainers.WithAdditionalLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostCreates:    []testcontainers.ContainerHook{track},
			PostTerminates: []testcontainers.ContainerHook{untrack},
		}),
	}
	moduleOpts = append(moduleOpts, opts...)
	moduleOpts = append(moduleOpts, bindClientPort(port))

	ctr, err := testcontainers.Run(ctx, img, moduleOpts...)
	var c *Container
	if ctr != nil {
		c = &Container{Container: ctr, endpoint: endpoint, ready: ready, tls: ca}
	}
	if err != nil {
		return c, fmt.Errorf("zktest: run %s: %w", img, explain(ctx, img, err))
	}
	return c, nil
}

// rerun replaces c's terminated container with a new one from img and opts,
// on the same client endpoint. c keeps whatever was created, for Terminate.
func (c *Container) rerun(ctx context.Context, img string, opts []testcontainers.ContainerCustomizer) error {
	settings, err := configOf(opts)
	if err != nil {
		return err
	}
	_, p, err := net.SplitHostPort(c.endpoint)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return err
	}
	ca := c.tls // the clients' configurations stay good
	if !settings.tls {
		ca = nil
	}
	nc, err := run(ctx, img, zooCfg(&settings), ca, port, opts)
	if nc != nil {
		*c = *nc
	}
	return err
}

// bindClientPort publishes the client port on 127.0.0.1:port. It comes after
// the user's customizers so that none of them can lose the binding.
func bindClientPort(port int) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if !slices.Contains(req.ExposedPorts, clientPort) {
			req.ExposedPorts = append(req.ExposedPorts, clientPort)
		}
		user := req.HostConfigModifier
		req.HostConfigModifier = func(hc *container.HostConfig) {
			if user != nil {
				user(hc)
			}
			if hc.PortBindings == nil {
				hc.PortBindings = network.PortMap{}
			}
			hc.PortBindings[network.MustParsePort(clientPort)] = []network.PortBinding{{
				HostIP:   netip.AddrFrom4([4]byte{127, 0, 0, 1}),
				HostPort: strconv.Itoa(port),
			}}
		}
		return nil
	}
}

// zooCfg renders the zoo.cfg that Run copies into the container.
func zooCfg(o *options) string {
	tick := o.tickTime.Truncate(time.Millisecond)
	// ZooKeeper's own default maximum is 20 ticks; never go below it, or a
	// long tick would make the minimum (2 ticks) exceed the maximum.
	maxSession := max(minMaxSessionTime, 20*tick)
	entries := [][2]string{
		{"tickTime", strconv.FormatInt(tick.Milliseconds(), 10)},
		{"initLimit", "10"},
		{"syncLimit", "5"},
		{"dataDir", "/data"},
		{"clientPort", "2181"},
		{"maxClientCnxns", "0"},
		{"maxSessionTimeout", strconv.FormatInt(maxSession.Milliseconds(), 10)},
		{"4lw.commands.whitelist", "*"},
		{"admin.enableServer", "false"},
		{"standaloneEnabled", "true"},
	}
	if o.tls {
		entries = slices.DeleteFunc(entries, func(e [2]string) bool { return e[0] == "clientPort" })
		entries = append(entries, tlsConfigEntries...)
	}
	for _, kv := range o.config {
		i := slices.IndexFunc(entries, func(e [2]string) bool { return e[0] == kv[0] })
		if i >= 0 {
			entries[i][1] = kv[1]
		} else {
			entries = append(entries, kv)
		}
	}
	var b strings.Builder
	b.WriteString("# Written by github.com/zkrecipes/zklock/zktest.\n")
	for _, kv := range entries {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return b.String()
}

var usedPorts struct {
	sync.Mutex
	m map[int]bool
}

func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") ||
		strings.Contains(msg, "address already in use")
}

// ClientEndpoint returns the address of the server's client port,
// "127.0.0.1:port". It stays the same across Stop and Start, and while the
// container is stopped.
func (c *Container) ClientEndpoint() string { return c.endpoint }

// Servers returns the server list for zk.Connect or zklock.Connect: the
// single [Container.ClientEndpoint].
func (c *Container) Servers() []string { return []string{c.endpoint} }

// Pause freezes every process of the container (docker pause). Clients stay
// connected through Docker's proxy but get no answer, so their requests and
// heartbeats time out and, if the pause outlasts the session timeout, the
// server expires their sessions as soon as it runs again.
//
// The kernel's cgroup freezer can fail to freeze a busy process in time
// (runc: "unable to freeze"; seen under load, with the JVM collecting
// garbage), and runc then thaws what it froze: Pause tries again, up to
// pauseTries times, a little later each time, before it gives up.
func (c *Container) Pause(ctx context.Context) error {
	err := c.withDocker(ctx, func(cli *testcontainers.DockerClient) error {
		var err error
		for try := 1; ; try++ {
			_, err = cli.ContainerPause(ctx, c.GetContainerID(), client.ContainerPauseOptions{})
			if err == nil || try == pauseTries || !strings.Contains(err.Error(), "unable to freeze") {
				return err
			}
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return fmt.Errorf("zktest: pause %s: %w", c.endpoint, err)
	}
	return nil
}

// pauseTries bounds Pause's tries of a freeze that failed.
const pauseTries = 5

// Unpause resumes a paused container and waits until the server answers srvr
// again, for up to a minute or until ctx is done.
func (c *Container) Unpause(ctx context.Context) error {
	err := c.withDocker(ctx, func(cli *testcontainers.DockerClient) error {
		_, err := cli.ContainerUnpause(ctx, c.GetContainerID(), client.ContainerUnpauseOptions{})
		return err
	})
	if err == nil {
		err = c.ready.WaitUntilReady(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("zktest: unpause %s: %w", c.endpoint, err)
	}
	return nil
}

func (c *Container) withDocker(ctx context.Context, f func(*testcontainers.DockerClient) error) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	return f(cli)
}

// Terminate stops and removes the container and its volumes, as
// testcontainers' Terminate does. It is safe to call on a nil *Container,
// which is what [Run] returns when it created nothing.
func (c *Container) Terminate(ctx context.Context, opts ...testcontainers.TerminateOption) error {
	if c == nil || c.Container == nil {
		return nil
	}
	if err := c.Container.Terminate(ctx, opts...); err != nil {
		return fmt.Errorf("zktest: terminate %s: %w", c.endpoint, err)
	}
	return nil
}

// FourLetter sends a four-letter command (srvr, mntr, wchs, cons, ruok, ...)
// to the server and returns its answer. ctx bounds the whole exchange: a
// paused server accepts the connection but never answers. A server that is
// still starting may answer "This ZooKeeper instance is not currently serving
// requests" without an error.
func (c *Container) FourLetter(ctx context.Context, cmd string) (string, error) {
	return c.ready.fourLetter(ctx, cmd)
}
