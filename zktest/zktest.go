package zktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// DefaultImage is the ZooKeeper image used when neither [WithImage] nor the
// ZKLOCK_ZK_IMAGE environment variable names one.
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

// Option configures [Run] and [Start].
type Option func(*settings)

type settings struct {
	image       string
	tickTime    time.Duration
	config      [][2]string // extra zoo.cfg entries, in order
	customizers []testcontainers.ContainerCustomizer
	logger      tclog.Logger
}

// WithImage sets the ZooKeeper image. The default is the value of the
// ZKLOCK_ZK_IMAGE environment variable, or [DefaultImage] when it is empty.
// The image must behave like the official "zookeeper" image; an empty image
// keeps the default.
func WithImage(image string) Option {
	return func(s *settings) {
		if image != "" {
			s.image = image
		}
	}
}

// WithTickTime sets ZooKeeper's tickTime, the unit of its timeouts. The
// default is 200ms, so the minimum session timeout (two ticks) is 400ms and a
// test can see a session expire in about a second. The value is rounded down
// to whole milliseconds; [Run] rejects a tick shorter than one millisecond.
func WithTickTime(d time.Duration) Option {
	return func(s *settings) { s.tickTime = d }
}

// WithConfig sets one zoo.cfg entry, key=value. It replaces zktest's own value
// for the same key, and a later WithConfig for a key replaces an earlier one.
// The readiness check sends srvr, so a 4lw.commands.whitelist that leaves srvr
// out makes [Run] time out. [Run] rejects a key that is empty or holds '=' or
// a line break, and a value that holds a line break.
func WithConfig(key, value string) Option {
	return func(s *settings) {
		for i, kv := range s.config {
			if kv[0] == key {
				s.config[i][1] = value
				return
			}
		}
		s.config = append(s.config, [2]string{key, value})
	}
}

// WithCustomizers passes testcontainers options through to
// testcontainers.Run, after zktest's own, so they win: environment
// variables, log consumers, networks, another wait strategy. The client port's
// fixed 127.0.0.1 binding is always kept, since [Container.Endpoint] depends
// on it. By default there are none.
func WithCustomizers(customizers ...testcontainers.ContainerCustomizer) Option {
	return func(s *settings) {
		s.customizers = append(s.customizers, customizers...)
	}
}

// withLogger sends testcontainers' log lines to logger; [Start] uses it to
// keep them in the test's output.
func withLogger(logger tclog.Logger) Option {
	return func(s *settings) { s.logger = logger }
}

// Container is a ZooKeeper server running in a Docker container, started by
// [Run] or [Start]. Its methods are safe for concurrent use, but pausing,
// stopping and starting the same container from several goroutines at once
// leaves it in whichever state the engine applied last.
type Container struct {
	ctr      *testcontainers.DockerContainer
	endpoint string
	ready    *serving
}

// Run starts a ZooKeeper container and waits, for up to a minute, until the
// server answers srvr. ctx bounds the whole start, including pulling the image.
//
// On failure Run returns an error and, if a container was created, that
// container too, so the caller can still terminate it, as testcontainers'
// modules do:
//
//	c, err := zktest.Run(ctx)
//	defer c.Terminate(context.Background()) // nil-safe
//	if err != nil { ... }
func Run(ctx context.Context, opts ...Option) (*Container, error) {
	s := settings{
		image:    os.Getenv(imageEnv),
		tickTime: defaultTickTime,
	}
	if s.image == "" {
		s.image = DefaultImage
	}
	for _, opt := range opts {
		opt(&s)
	}
	cfg, err := zooCfg(&s)
	if err != nil {
		return nil, err
	}

	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("zktest: choose a host port: %w", err)
		}
		c, err := run(ctx, &s, cfg, port)
		if err == nil || attempt == portAttempts || !portTaken(err) {
			return c, err
		}
		// Another process bound the port after freePort checked it.
		if terr := c.Terminate(context.WithoutCancel(ctx)); terr != nil {
			return c, errors.Join(err, terr)
		}
	}
}

func run(ctx context.Context, s *settings, cfg string, port int) (*Container, error) {
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ready := &serving{addr: endpoint, timeout: startupTimeout}

	var opts []testcontainers.ContainerCustomizer
	if s.logger != nil {
		opts = append(opts, testcontainers.WithLogger(s.logger))
	}
	opts = append(opts,
		testcontainers.WithExposedPorts(clientPort),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader:            strings.NewReader(cfg),
			ContainerFilePath: confPath,
			FileMode:          0o644,
		}),
		testcontainers.WithLabels(map[string]string{labelKey: "true"}),
		testcontainers.WithWaitStrategy(ready),
		testcontainers.WithAdditionalLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostCreates:    []testcontainers.ContainerHook{track},
			PostTerminates: []testcontainers.ContainerHook{untrack},
		}),
	)
	opts = append(opts, s.customizers...)
	opts = append(opts, bindClientPort(port))

	ctr, err := testcontainers.Run(ctx, s.image, opts...)
	var c *Container
	if ctr != nil {
		c = &Container{ctr: ctr, endpoint: endpoint, ready: ready}
	}
	if err != nil {
		return c, fmt.Errorf("zktest: run %s: %w", s.image, err)
	}
	return c, nil
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
func zooCfg(s *settings) (string, error) {
	if s.tickTime < time.Millisecond {
		return "", fmt.Errorf("zktest: tick time %v: must be at least 1ms", s.tickTime)
	}
	tick := s.tickTime.Truncate(time.Millisecond)
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
	for _, kv := range s.config {
		key, value := kv[0], kv[1]
		if key == "" || strings.ContainsAny(key, "=\r\n") || strings.ContainsAny(value, "\r\n") {
			return "", fmt.Errorf("zktest: config entry %q=%q: invalid key or value", key, value)
		}
		i := slices.IndexFunc(entries, func(e [2]string) bool { return e[0] == key })
		if i >= 0 {
			entries[i][1] = value
		} else {
			entries = append(entries, kv)
		}
	}
	var b strings.Builder
	b.WriteString("# Written by github.com/zkrecipes/zklock/zktest.\n")
	for _, kv := range entries {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return b.String(), nil
}

var usedPorts struct {
	sync.Mutex
	m map[int]bool
}

// freePort returns a port that is free on 127.0.0.1 now. It prefers ports
// below the usual ephemeral ranges (Linux starts at 32768), which the kernel
// never hands to outgoing connections: the port must stay free while a
// container is stopped. A port is never handed out twice in a process.
func freePort() (int, error) {
	usedPorts.Lock()
	defer usedPorts.Unlock()
	if usedPorts.m == nil {
		usedPorts.m = make(map[int]bool)
	}
	try := func(port int) (int, error) {
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
	for range 50 {
		if port, err := try(20000 + rand.IntN(12000)); err == nil {
			return port, nil
		}
	}
	var err error
	for range 10 {
		var port int
		if port, err = try(0); err == nil {
			return port, nil
		}
	}
	return 0, err
}

func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") ||
		strings.Contains(msg, "address already in use")
}

// Endpoint returns the address of the server's client port, "127.0.0.1:port".
// It stays the same across [Container.Stop] and [Container.Start].
func (c *Container) Endpoint() string { return c.endpoint }

// Servers returns the server list for zk.Connect: the single [Container.Endpoint].
func (c *Container) Servers() []string { return []string{c.endpoint} }

// Container returns the underlying testcontainers container, for what zktest
// does not cover: logs, exec, networks.
func (c *Container) Container() testcontainers.Container {
	if c == nil || c.ctr == nil {
		return nil
	}
	return c.ctr
}

// Stop stops the container, giving the server ten seconds to shut down
// cleanly, the engine's default. The data directory survives, and so do the
// sessions of clients that reconnect within their timeout after
// [Container.Start]. Clients get connection refused in the meantime.
func (c *Container) Stop(ctx context.Context) error {
	if err := c.ctr.Stop(ctx, nil); err != nil {
		return fmt.Errorf("zktest: stop %s: %w", c.endpoint, err)
	}
	return nil
}

// Start starts a stopped container again, on the same endpoint, and waits
// until the server answers srvr, for up to a minute or until ctx is done.
func (c *Container) Start(ctx context.Context) error {
	if err := c.ctr.Start(ctx); err != nil {
		return fmt.Errorf("zktest: start %s: %w", c.endpoint, err)
	}
	return nil
}

// Pause freezes every process of the container (docker pause). Clients stay
// connected through Docker's proxy but get no answer, so their requests and
// heartbeats time out and, if the pause outlasts the session timeout, the
// server expires their sessions as soon as it runs again.
func (c *Container) Pause(ctx context.Context) error {
	err := c.withDocker(ctx, func(cli *testcontainers.DockerClient) error {
		_, err := cli.ContainerPause(ctx, c.ctr.GetContainerID(), client.ContainerPauseOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("zktest: pause %s: %w", c.endpoint, err)
	}
	return nil
}

// Unpause resumes a paused container and waits until the server answers srvr
// again, for up to a minute or until ctx is done.
func (c *Container) Unpause(ctx context.Context) error {
	err := c.withDocker(ctx, func(cli *testcontainers.DockerClient) error {
		_, err := cli.ContainerUnpause(ctx, c.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
		return err
	})
	if err == nil {
		err = c.ready.WaitUntilReady(ctx, c.ctr)
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

// Terminate stops and removes the container and its volumes. It is safe to
// call on a nil *Container, which is what [Run] returns when it created
// nothing.
func (c *Container) Terminate(ctx context.Context) error {
	if c == nil || c.ctr == nil {
		return nil
	}
	if err := c.ctr.Terminate(ctx); err != nil {
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
	return FourLetter(ctx, c.endpoint, cmd)
}
