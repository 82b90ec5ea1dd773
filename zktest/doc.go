// Package zktest runs real ZooKeeper servers in Docker containers for tests:
// zklock's own tests and the tests of programs that use zklock, in particular
// the ones that must break a server (pause it, stop it, restart it) to see what
// a lock does when its session is lost.
//
// It is a testcontainers-go module, shaped like the ones in testcontainers-go's
// modules/ directory, and a Go module of its own
// (github.com/zkrecipes/zklock/zktest), so that zklock's users do not
// download Docker's client libraries unless they use it.
//
// # Starting a server
//
// [Run] starts one standalone server with testcontainers-go and returns a
// [Container] once the server answers the srvr four-letter command. Clients
// connect to [Container.Servers]. zktest's own options ([WithTickTime],
// [WithConfig]) and testcontainers' customizers go in the same list, after
// the image, and apply after zktest's defaults:
//
//	c, err := zktest.Run(ctx, zktest.Image(), zktest.WithTickTime(100*time.Millisecond))
//	testcontainers.CleanupContainer(t, c)
//	require.NoError(t, err)
//
// A Container embeds its testcontainers.Container, so
// testcontainers.CleanupContainer and testcontainers.TerminateContainer take
// it, and on failure Run returns the partially started container with the
// error, for them to clean up. In a test, [Start] does all of this.
//
// The client port is published on 127.0.0.1 on a fixed host port, chosen free
// when the container is created and kept for its whole life, so a client keeps
// the same address ([Container.ClientEndpoint]) across Stop and Start and can
// reconnect to the restarted server. A local Docker engine is assumed. The
// port is chosen in 20000-31999; on a host where ports are reserved, choose
// the range with [WithHostPorts] or, for every container of a run, the
// environment variable ZKTEST_PORTS:
//
//	ZKTEST_PORTS=30000-30999 go test ./...
//
// Run writes its own /conf/zoo.cfg into the container, tuned for tests:
//
//	tickTime=200                # sessions can expire in about a second
//	dataDir=/data
//	clientPort=2181
//	maxClientCnxns=0            # no per-client connection limit
//	maxSessionTimeout=30000     # a client's usual 10s is not clipped
//	4lw.commands.whitelist=*    # srvr, mntr, wchs, cons for tests
//	admin.enableServer=false
//
// ZooKeeper's minimum session timeout is two ticks: 400ms by default. Change
// the tick with [WithTickTime] and any key with [WithConfig].
//
// # Images
//
// [Image] returns the image named by the ZKLOCK_ZK_IMAGE environment
// variable, or else [DefaultImage]; [Start], [Servers] and [StartEnsemble]
// run it, and [Run] and [RunEnsemble] run the image they are given. Any
// image that behaves like the official "zookeeper" image works: it must read
// /conf/zoo.cfg when it runs "zkServer.sh start-foreground". The script
// scripts/setup.sh of zklock's repository builds two such images offline,
// from Debian's packages, on machines that cannot pull from Docker Hub:
// zklock-zookeeper:3.8 (ZooKeeper 3.8.0) and zklock-zookeeper:3.9 (3.9.3). It
// writes the name of the one the tests use to .zklock-image; set
// ZKLOCK_ZK_IMAGE to run the other.
//
// # A shared server per test binary
//
// Most tests only need a server: [Servers] returns the addresses of one
// container shared by the whole test binary, started on first use, or the
// servers listed in ZKLOCK_TEST_SERVERS (comma-separated host:port) when that
// variable is set, in which case no container is started at all. Tests that
// share a server should each work under their own root path, for example one
// derived from t.Name(). [Main] terminates the shared container when the tests
// are over:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestLock(t *testing.T) {
//		conn, _, err := zk.Connect(zktest.Servers(t), 10*time.Second)
//		require.NoError(t, err)
//		t.Cleanup(conn.Close)
//		// ...
//	}
//
// A test that breaks its server must not break everyone else's: [Start]
// always starts a container of its own, even when ZKLOCK_TEST_SERVERS is set.
// Use [External] to skip such tests where Docker is not meant to be used.
//
//	func TestLockLoss(t *testing.T) {
//		zkc := zktest.Start(t, zktest.WithTickTime(100*time.Millisecond))
//		// connect to zkc.Servers(), take a lock, then:
//		require.NoError(t, zkc.Pause(t.Context()))
//		// ... the client disconnects; a zklock lease ends at its deadline
//		// (ValidUntil), or at once with zklock.WithLossOnDisconnect ...
//		require.NoError(t, zkc.Unpause(t.Context()))
//	}
//
// # Clients across restarts
//
// ZooKeeper 3.8 and 3.9 can leave a connection made while the server starts
// open and unanswered (ZOOKEEPER-5051), and a paused server answers none;
// go-zookeeper waits ten times two-thirds of the session timeout for a
// handshake, so a plain go-zookeeper client that reconnects at the wrong
// moment of a [Container.Stop] and Start, or of an [Ensemble.Restart], can
// lose its session. Give such clients [HandshakeDialer]; zklock's Client
// bounds its handshakes itself.
//
//	conn, _, err := zk.Connect(zkc.Servers(), 10*time.Second,
//		zk.WithDialer(zktest.HandshakeDialer(5*time.Second)))
//
// # TLS and x509 identities
//
// [WithTLS] makes a container serve TLS only, with client certificates
// required and ZooKeeper's X509AuthenticationProvider on; the certificate
// authority and the server's certificate are made when it starts.
// [Container.TLSConfig] returns a client configuration with a certificate
// of subject CN=cn, whose x509 identity (for ACLs) is "CN=<cn>":
//
//	zkc := zktest.Start(t, zktest.WithTLS())
//	c, err := zklock.Connect(ctx, zkc.Servers(), zklock.WithTLS(zkc.TLSConfig("billing")))
//	// an ACL of zk.ACL{Perms: zk.PermAll, Scheme: "x509", ID: "CN=billing"}
//	// lets this client, and no other, use a node
//
// [Container.TLSFiles] writes the same as PEM files (the authority, a
// client certificate and its key), for the zklock command's -tls-ca,
// -tls-cert and -tls-key flags, or any other client:
//
//	f, err := zkc.TLSFiles(t.TempDir(), "ops")
//	// zklock ls -servers 127.0.0.1:<port> -tls-ca f.CA -tls-cert f.Cert -tls-key f.Key /
//
// # Faults without Docker
//
// [Faults] breaks a single client's connections instead of the server: it
// drops, delays or partitions the traffic of one zk.Conn (a partition holds
// bytes back as a real network does, so only timeouts notice), or cuts the
// connection right after a given request ([Faults.DropAfter]), which needs no
// container of its own.
//
// # Expiring a session
//
// [Faults.ExpireSession] expires the client's session on demand, in about a
// second whatever the session timeout: like Curator's KillSession it opens a
// second connection with the client's session id and password (read off the
// wire) and closes that session, then waits until the client has been told.
// [Faults.KillSession] does the first half only. [Faults.PartitionUntilExpired]
// expires it the way a real network failure does, by partitioning the client
// for twice the session timeout: slower, but the client goes through the
// same sequence of events as in production (disconnect, then expiry).
//
// # An ensemble
//
// [RunEnsemble] and [StartEnsemble] start a 3-node ensemble on a private
// Docker network, each node's client port published on 127.0.0.1. Stop,
// start, pause or kill one node through [Ensemble.Node], or find and kill
// the leader with [Ensemble.Leader] and [Ensemble.KillLeader].
// [Ensemble.Isolate] cuts one node off from the other two while its clients
// still reach it (a partition; [Ensemble.Heal] ends it), [Ensemble.Restart]
// restarts one with its data (in a loop: a rolling restart), and
// [Ensemble.Rebuild] brings all three back empty on the same endpoints. The
// ensemble's timing is fast (a 200ms tick); RunEnsemble's doc shows how to
// run it at ZooKeeper's own. Isolate needs root, a local Docker engine and
// the host's nsenter and iptables (scripts/setup.sh installs them).
//
// # Servers that move
//
// Where ZooKeeper runs in Kubernetes, a StatefulSet's rolling update
// replaces its pods one by one, each on a new address, and a pod that is
// not ready has no DNS record. [Movable] puts servers (of a [Container],
// an [Ensemble], or [Servers]) behind names that a test moves the same
// way, for a client that takes a lookup function:
//
//	m := zktest.MovableServers(t, e.Servers())
//	c, err := zklock.Connect(ctx, m.Servers(), zklock.WithHostResolver(m.Lookup))
//	// ... take leases, then, as a rolling update would:
//	err = m.MoveAll(ctx, func(ctx context.Context, i int) error { return e.Restart(ctx, i) })
//
// [Movable.Move] moves one server to a new address at once,
// [Movable.Unresolvable] takes its name away, and [Movable.Unreachable] its
// address. The pieces work alone: [Names] is a name table of the test's
// own, and [Forwarder] a server's address that moves. They need Linux,
// where every address of 127.0.0.0/8 is local.
//
// # A server that swaps sessions
//
// ZooKeeper answers a reconnect with the client's own session, or with its
// expiry; ClickHouse Keeper, which many run in its place, may answer with a
// new session (ClickHouse#116690), while the old one lives on, with its
// ephemeral nodes, until it times out. [Forwarder.SwapSessions] makes a
// [Forwarder] play such a server, for any client; [Forwarder.Drop] makes
// its clients reconnect:
//
//	fw := zktest.Forward(t, zktest.Servers(t)[0])
//	c, err := zklock.Connect(ctx, []string{fw.Addr()})
//	// ... take leases, then:
//	fw.SwapSessions(true)
//	fw.Drop() // every lease of c ends with zklock.ErrSessionReplaced
//
// # Cleaning up
//
// Testcontainers' reaper (Ryuk) removes what a crashed test leaves behind, when
// it can run. Where it cannot, for example offline with
// TESTCONTAINERS_RYUK_DISABLED=true, zktest terminates every container it
// starts: [Start] from t.Cleanup, the shared container in [Main], and, while
// Main runs, all of them when the process receives SIGINT or SIGTERM. A test
// binary killed any other way (go test -timeout panics) leaves its containers
// running; they carry the label org.zkrecipes.zktest=true:
//
//	docker rm -f $(docker ps -aq --filter label=org.zkrecipes.zktest=true)
package zktest
