// ZkPeer: Apache Curator lock peer for zklock interoperability tests and benchmarks.
//
// Build and run with tools/peers/build-peers.sh (it writes tools/peers/java/build/zkpeer).
// The command line and output format are shared with tools/peers/python/zkpeer.py:
//
//   zkpeer hold  --servers H:P --path /p --recipe mutex|read|write --count N --hold-ms M --id NAME
//                [--session-ms 10000] [--start-file F] [--once-then-wait]
//                [--acquire-timeout-ms 0] [--node-names native|curator] [--revocable]
//   zkpeer hold  --servers H:P --path /p --recipe semaphore --leases L [--shared-count /count] ...
//   zkpeer setcount --servers H:P --path /count --count N [--id NAME]
//   zkpeer revoke --servers H:P --node /p/_c_...-lock-0000000000 [--id NAME] [--session-ms 10000]
//   zkpeer latch --servers H:P --path /p --id NAME [--count 1] [--lead-ms 0] [--once-then-wait]
//                [--print-leader] [--session-ms 10000] [--acquire-timeout-ms 0] [--start-file F]
//   zkpeer shared --servers H:P --path /p --recipe semaphore|mutex|latch --threads T --id NAME
//                [--leases L] [--count N --hold-ms M | --controlled] [--separate-sessions]
//                [--session-ms 10000] [--acquire-timeout-ms 0]
//   zkpeer version [--id NAME]
//   zkpeer bench --servers H:P --path /p --workload W1|W2|W3|W4|W5|W6 --clients C --duration-ms D
//                [--leases 3] [--read-pct 90] [--session-ms 10000] [--acquire-timeout-ms 10000]
//                [--hold-us 0] [--paths 1000]
//                [--writer-ms 0] [--writer-hold-us 1000] [--start-at-ms 0]   (W6)
//   zkpeer drain --servers H:P --path /p --recipe mutex|semaphore --waiters D --clients C [--leases 10]
//                [--session-ms 30000] [--id NAME]   (zkbench's deep queues; protocol at drain())
//
// hold prints "ACQ <id> <recipe> <unix_nanos>" right after acquire returns, "REL <id> <recipe>
// <unix_nanos>" right before release, "DONE <id> <count>" at the end, or "ERR <id> <message>"
// (exit 1). bench prints one JSON object. Curator always writes Curator-format nodes, so
// --node-names is accepted (for a uniform harness) and ignored.
//
// Revocation (Curator only: kazoo has no revocation convention, so the Python peer has neither):
// hold --revocable makes each acquisition revocable (InterProcessMutex.makeRevocable); when its
// RevocationListener fires the peer prints "REVOKED <id> <recipe> <unix_nanos>" and ends the
// current hold at once (REL, release), or, if it fired while the peer was still waiting, the next
// hold as soon as it is acquired. revoke calls Revoker.attemptRevoke(client, node) once and
// prints "DONE <id> 1"; like Revoker, it says nothing about a node that does not exist.
//
// Semaphore: hold --recipe semaphore holds one lease of InterProcessSemaphoreV2(client, path,
// --leases) per round, or, with --shared-count, of InterProcessSemaphoreV2(client, path,
// SharedCount(client, countPath, --leases)), the count started for the whole run; setcount sets
// such a count once (SharedCount.setCount) and prints "DONE <id> 1".
//
// Leader election (Curator only): latch runs Curator's LeaderLatch(client, path, id), whose node
// `_c_<uuid>-latch-<seq>` holds the id's UTF-8 bytes, for --count rounds on one session. Each
// round starts a new LeaderLatch and prints "NODE <id> <znode path>" once its node exists; when
// LeaderLatchListener.isLeader fires, "LEAD <id> latch <unix_nanos>"; after --lead-ms (or, with
// --once-then-wait, a line or EOF on stdin), "RESIGN <id> latch <unix_nanos>", then it closes the
// latch (CloseMode.SILENT: the node is deleted in the background). If notLeader fires while it
// leads (Curator's LeaderLatch gives up leadership on SUSPENDED and LOST), it prints "NOTLEAD <id>
// latch <unix_nanos>" and waits to lead again in the same round. --print-leader prints "LEADER
// <id> <leader's id> <unix_nanos>" from LeaderLatch.getLeader() right after NODE and right after
// each LEAD ("-" for Curator's dummy participant: nobody leads); with --once-then-wait, a stdin
// line "leader" prints one more and does not resign. At the end "DONE <id> <count>".
//
// One process, many threads (Curator's usual setup): shared runs --threads threads on ONE
// CuratorFramework (one session; --separate-sessions gives each thread a client of its own),
// each with its own recipe object on --path: InterProcessSemaphoreV2(client, path, --leases) (node
// data: the thread's id), an InterProcessMutex (node data: the thread's id), or a new
// LeaderLatch(client, path, thread id) per round. Thread k's id is "<id>-k". Each acquisition
// prints "ACQ <id>-k <recipe> <unix_nanos> <znode>" right after it returns (for a latch, once it
// leads) and "REL <id>-k <recipe> <unix_nanos>" right before it is given up. With --count N
// --hold-ms M every thread does N rounds. With --controlled every thread acquires again at once
// after each release and holds until told: a stdin line "release k" ends thread k's hold; "end"
// or EOF ends every thread once it holds (a waiting thread acquires, then releases at once).
// At the end "DONE <id> <acquisitions of all threads>".
//
// version prints "VERSION <id> curator <version> zookeeper <version>": the jars it runs with.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class ZkPeer {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);

    private static String id = "peer";

    /** Prints one line and flushes it at once; lines from several threads never interleave. */
    private static synchronized void emit(String line) {
        OUT.println(line);
        OUT.flush();
    }

    /** Wall clock in Unix nanoseconds (microsecond resolution on Linux with Java 17). */
    private static long unixNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static final class UsageException extends Exception {
        UsageException(String msg) { super(msg); }
    }

    private static final class Args {
        final String mode;
        final Map<String, String> opts = new HashMap<>();

        Args(String[] argv) throws UsageException {
            if (argv.length == 0) {
                throw new UsageException("usage: zkpeer hold|bench|revoke|latch --servers H:P --path /p ...");
            }
            mode = argv[0];
            for (int i = 1; i < argv.length; i++) {
                String a = argv[i];
                if (!a.startsWith("--")) {
                    throw new UsageException("unexpected argument: " + a);
                }
                String key = a.substring(2);
                String val;
                int eq = key.indexOf('=');
                if (eq >= 0) {
                    val = key.substring(eq + 1);
                    key = key.substring(0, eq);
                } else if (key.equals("once-then-wait") || key.equals("revocable") || key.equals("print-leader")
                        || key.equals("controlled") || key.equals("separate-sessions")) {
                    val = "true";
                } else {
                    if (i + 1 >= argv.length) {
                        throw new UsageException("missing value for --" + key);
                    }
                    val = argv[++i];
                }
                opts.put(key, val);
            }
        }

        String str(String key, String def) throws UsageException {
            String v = opts.get(key);
            if (v == null) {
                if (def == null) {
                    throw new UsageException("missing required option --" + key);
                }
                return def;
            }
            return v;
        }

        int integer(String key, Integer def) throws UsageException {
            String v = opts.get(key);
            if (v == null) {
                if (def == null) {
                    throw new UsageException("missing required option --" + key);
                }
                return def;
            }
            try {
                return Integer.parseInt(v);
            } catch (NumberFormatException e) {
                throw new UsageException("--" + key + " wants an integer, got " + v);
            }
        }

        boolean flag(String key) {
            String v = opts.get(key);
            return v != null && !v.equals("false") && !v.equals("0");
        }
    }

    public static void main(String[] argv) {
        int rc;
        try {
            Args args = new Args(argv);
            id = args.str("id", "peer");
            switch (args.mode) {
                case "hold":
                    hold(args);
                    break;
                case "bench":
                    bench(args);
                    break;
                case "revoke":
                    revoke(args);
                    break;
                case "latch":
                    latch(args);
                    break;
                case "setcount":
                    setCount(args);
                    break;
                case "shared":
                    shared(args);
                    break;
                case "version":
                    version();
                    break;
                case "drain":
                    drain(args);
                    break;
                default:
                    throw new UsageException("unknown mode " + args.mode
                            + " (want hold, bench, revoke, latch, setcount, shared, version or drain)");
            }
            rc = 0;
        } catch (Throwable t) {
            String msg = t.getClass().getSimpleName() + ": " + t.getMessage();
            emit("ERR " + id + " " + msg.replace('\n', ' ').replace('\r', ' '));
            rc = 1;
        }
        // Curator and ZooKeeper leave non-daemon threads behind when something failed.
        System.exit(rc);
    }

    private static CuratorFramework newClient(String servers, int sessionMs) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(servers)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.min(sessionMs, 15000))
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 2000))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            client.close();
            throw new IllegalStateException("could not connect to " + servers + " within 30s");
        }
        return client;
    }

    private static InterProcessLock newLock(CuratorFramework client, String path, String recipe) throws UsageException {
        switch (recipe) {
            case "mutex":
                return new InterProcessMutex(client, path);
            case "read":
                return new InterProcessReadWriteLock(client, path).readLock();
            case "write":
                return new InterProcessReadWriteLock(client, path).writeLock();
            default:
                throw new UsageException("--recipe wants mutex, read or write, got " + recipe);
        }
    }

    private static void acquire(InterProcessLock lock, int timeoutMs, String path) throws Exception {
        if (timeoutMs > 0) {
            if (!lock.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("acquire timed out after " + timeoutMs + "ms on " + path);
            }
        } else {
            lock.acquire();
        }
    }

    // ---------------------------------------------------------------- version

    /** version: the Curator and ZooKeeper client this launcher loads. */
    private static void version() throws Exception {
        java.util.Properties pom = new java.util.Properties();
        try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (in != null) {
                pom.load(in);
            }
        }
        // "3.8.0-<commit>, built on ...": the version is what comes before '-' or ','.
        String zk = org.apache.zookeeper.Version.getFullVersion().split("[-, ]", 2)[0];
        emit("VERSION " + id + " curator " + pom.getProperty("version", "unknown") + " zookeeper " + zk);
    }

    // ---------------------------------------------------------------- shared

    /** One thread's recipe in shared: acquire returns the acquisition's znode. */
    private interface Holding {
        String acquire(int timeoutMs) throws Exception;

        void release() throws Exception;
    }

    /** An InterProcessMutex whose node holds the thread's id, and that names its node. */
    private static final class NamedMutex extends InterProcessMutex {
        private final byte[] data;

        NamedMutex(CuratorFramework client, String path, String who) {
            super(client, path);
            data = who.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        protected byte[] getLockNodeBytes() {
            return data;
        }

        String node() {
            return getLockPath();
        }
    }

    private static Holding newHolding(CuratorFramework client, String path, String recipe, String who, int leases)
            throws UsageException {
        switch (recipe) {
            case "semaphore": {
                InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, leases);
                sem.setNodeData(who.getBytes(StandardCharsets.UTF_8));
                return new Holding() {
                    private Lease lease;

                    public String acquire(int timeoutMs) throws Exception {
                        lease = timeoutMs > 0 ? sem.acquire(timeoutMs, TimeUnit.MILLISECONDS) : sem.acquire();
                        if (lease == null) {
                            throw new IllegalStateException("acquire timed out after " + timeoutMs + "ms on " + path);
                        }
                        return path + "/leases/" + lease.getNodeName();
                    }

                    public void release() throws Exception {
                        lease.close();
                    }
                };
            }
            case "mutex": {
                NamedMutex m = new NamedMutex(client, path, who);
                return new Holding() {
                    public String acquire(int timeoutMs) throws Exception {
                        ZkPeer.acquire(m, timeoutMs, path);
                        return m.node();
                    }

                    public void release() throws Exception {
                        m.release();
                    }
                };
            }
            case "latch":
                return new Holding() {
                    private LeaderLatch latch;

                    public String acquire(int timeoutMs) throws Exception {
                        latch = new LeaderLatch(client, path, who, LeaderLatch.CloseMode.SILENT);
                        latch.start();
                        if (timeoutMs > 0) {
                            if (!latch.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                                throw new IllegalStateException("no leadership within " + timeoutMs + "ms on " + path);
                            }
                        } else {
                            latch.await();
                        }
                        return latch.getOurPath();
                    }

                    public void release() throws Exception {
                        latch.close();
                    }
                };
            default:
                throw new UsageException("--recipe wants semaphore, mutex or latch, got " + recipe);
        }
    }

    /**
     * shared: --threads threads, each with its own recipe object, on one CuratorFramework (or,
     * with --separate-sessions, one each). Lines as described at the top of this file.
     */
    private static void shared(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        String recipe = args.str("recipe", null);
        int threads = args.integer("threads", null);
        int sessionMs = args.integer("session-ms", 10000);
        int timeoutMs = args.integer("acquire-timeout-ms", 0);
        int leases = recipe.equals("semaphore") ? args.integer("leases", null) : 0;
        boolean controlled = args.flag("controlled");
        int count = controlled ? 0 : args.integer("count", null);
        int holdMs = controlled ? 0 : args.integer("hold-ms", null);
        if (threads < 1) {
            throw new UsageException("--threads wants at least 1, got " + threads);
        }
        int clientCount = args.flag("separate-sessions") ? threads : 1;
        List<CuratorFramework> clients = new ArrayList<>();
        try {
            for (int i = 0; i < clientCount; i++) {
                clients.add(newClient(servers, sessionMs));
            }
            List<Holding> holdings = new ArrayList<>();
            List<BlockingQueue<String>> commands = new ArrayList<>();
            for (int k = 1; k <= threads; k++) {
                holdings.add(newHolding(clients.get((k - 1) % clientCount), path, recipe, id + "-" + k, leases));
                commands.add(new LinkedBlockingQueue<>());
            }
            if (controlled) {
                Thread reader = new Thread(() -> readCommands(commands), "stdin");
                reader.setDaemon(true);
                reader.start();
            }
            AtomicInteger acquisitions = new AtomicInteger();
            List<Thread> workers = new ArrayList<>();
            for (int k = 1; k <= threads; k++) {
                String who = id + "-" + k;
                Holding h = holdings.get(k - 1);
                BlockingQueue<String> cmds = commands.get(k - 1);
                Thread w = new Thread(() -> {
                    try {
                        for (int round = 0; controlled || round < count; round++) {
                            String node = h.acquire(timeoutMs);
                            acquisitions.incrementAndGet();
                            emit("ACQ " + who + " " + recipe + " " + unixNanos() + " " + node);
                            String cmd = "release";
                            if (controlled) {
                                cmd = cmds.take();
                            } else if (holdMs > 0) {
                                Thread.sleep(holdMs);
                            }
                            emit("REL " + who + " " + recipe + " " + unixNanos());
                            h.release();
                            if (cmd.equals("end")) {
                                break;
                            }
                        }
                    } catch (Throwable t) {
                        // The other threads may wait for ever (for a lease this one holds, or
                        // for a command): end the process now, as main does on an error.
                        String msg = t.getClass().getSimpleName() + ": " + t.getMessage();
                        emit("ERR " + who + " " + msg.replace('\n', ' ').replace('\r', ' '));
                        System.exit(1);
                    }
                }, who);
                workers.add(w);
            }
            for (Thread w : workers) {
                w.start();
            }
            for (Thread w : workers) {
                w.join();
            }
            emit("DONE " + id + " " + acquisitions.get());
        } finally {
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /** Reads shared --controlled's stdin: "release k" for thread k; "end" or EOF for all. */
    private static void readCommands(List<BlockingQueue<String>> commands) {
        try {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] f = line.trim().split("\\s+");
                if (f.length == 2 && f[0].equals("release")) {
                    int k = Integer.parseInt(f[1]);
                    if (k >= 1 && k <= commands.size()) {
                        commands.get(k - 1).add("release");
                    }
                } else if (f[0].equals("end")) {
                    break;
                }
            }
        } catch (Exception ignore) {
            // an unreadable stdin counts as EOF
        }
        for (BlockingQueue<String> q : commands) {
            q.add("end");
        }
    }

    // ---------------------------------------------------------------- hold

    private static void hold(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        String recipe = args.str("recipe", null);
        int sessionMs = args.integer("session-ms", 10000);
        int timeoutMs = args.integer("acquire-timeout-ms", 0);
        boolean onceThenWait = args.flag("once-then-wait");
        int count = onceThenWait ? 1 : args.integer("count", null);
        int holdMs = onceThenWait ? 0 : args.integer("hold-ms", null);
        String startFile = args.opts.get("start-file");
        String nodeNames = args.str("node-names", "native");
        if (!nodeNames.equals("native") && !nodeNames.equals("curator")) {
            throw new UsageException("--node-names wants native or curator, got " + nodeNames);
        }
        if (recipe.equals("semaphore")) {
            holdSemaphore(args, servers, path, sessionMs, timeoutMs, onceThenWait, count, holdMs, startFile);
            return;
        }
        if (!recipe.equals("mutex") && !recipe.equals("read") && !recipe.equals("write")) {
            throw new UsageException("--recipe wants mutex, read, write or semaphore, got " + recipe);
        }
        if (args.flag("revocable")) {
            holdRevocable(args, servers, path, recipe, sessionMs, timeoutMs, onceThenWait, count, holdMs, startFile);
            return;
        }

        CuratorFramework client = newClient(servers, sessionMs);
        try {
            InterProcessLock lock = newLock(client, path, recipe);
            if (startFile != null) {
                while (!Files.exists(Paths.get(startFile))) {
                    Thread.sleep(2);
                }
            }
            BufferedReader stdin = onceThenWait
                    ? new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
                    : null;
            for (int i = 0; i < count; i++) {
                acquire(lock, timeoutMs, path);
                emit("ACQ " + id + " " + recipe + " " + unixNanos());
                if (onceThenWait) {
                    stdin.readLine(); // a line or EOF releases the lock
                } else if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                emit("REL " + id + " " + recipe + " " + unixNanos());
                lock.release();
            }
            emit("DONE " + id + " " + count);
        } finally {
            client.close();
        }
    }

    /**
     * hold --recipe semaphore: as hold, one lease of an InterProcessSemaphoreV2 per round, its
     * size the constant --leases or a SharedCount at --shared-count (seeded with --leases).
     */
    private static void holdSemaphore(Args args, String servers, String path, int sessionMs, int timeoutMs,
            boolean onceThenWait, int count, int holdMs, String startFile) throws Exception {
        int leases = args.integer("leases", null);
        String countPath = args.opts.get("shared-count");
        CuratorFramework client = newClient(servers, sessionMs);
        SharedCount shared = null;
        try {
            InterProcessSemaphoreV2 sem;
            if (countPath != null) {
                shared = new SharedCount(client, countPath, leases);
                shared.start();
                sem = new InterProcessSemaphoreV2(client, path, shared);
            } else {
                sem = new InterProcessSemaphoreV2(client, path, leases);
            }
            sem.setNodeData(id.getBytes(StandardCharsets.UTF_8));
            if (startFile != null) {
                while (!Files.exists(Paths.get(startFile))) {
                    Thread.sleep(2);
                }
            }
            BufferedReader stdin = onceThenWait
                    ? new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
                    : null;
            for (int i = 0; i < count; i++) {
                Lease lease;
                if (timeoutMs > 0) {
                    lease = sem.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                    if (lease == null) {
                        throw new IllegalStateException("acquire timed out after " + timeoutMs + "ms on " + path);
                    }
                } else {
                    lease = sem.acquire();
                }
                emit("ACQ " + id + " semaphore " + unixNanos());
                if (onceThenWait) {
                    stdin.readLine(); // a line or EOF returns the lease
                } else if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                emit("REL " + id + " semaphore " + unixNanos());
                lease.close(); // returnLease would hide a failed delete
            }
            emit("DONE " + id + " " + count);
        } finally {
            if (shared != null) {
                shared.close();
            }
            client.close();
        }
    }

    /** setcount: SharedCount.setCount once, on a count created with the new value if absent. */
    private static void setCount(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        int n = args.integer("count", null);
        CuratorFramework client = newClient(servers, args.integer("session-ms", 10000));
        try (SharedCount shared = new SharedCount(client, path, n)) {
            shared.start();
            shared.setCount(n);
            emit("DONE " + id + " 1");
        } finally {
            client.close();
        }
    }

    /** What ends a revocable hold: a line (or EOF) on stdin, or the RevocationListener. */
    private enum Signal { STDIN, REVOKED }

    /**
     * hold --revocable: as hold, but every acquisition is made revocable, and a revocation ends
     * the hold it belongs to (the current one, or the next if it came while waiting).
     *
     * Two Curator 5.4 facts shape this. The listener runs on the executor given to makeRevocable,
     * by default MoreExecutors.directExecutor(), that is ZooKeeper's event thread; and
     * InterProcessMutex belongs to the thread that acquired it (release() from another thread
     * throws IllegalMonitorStateException "You do not own the lock"). So the listener only
     * reports and signals; the holding thread releases. And LockInternals.releaseLock clears the
     * RevocationSpec, so makeRevocable holds for one acquisition: it is called before each.
     */
    private static void holdRevocable(Args args, String servers, String path, String recipe, int sessionMs,
            int timeoutMs, boolean onceThenWait, int count, int holdMs, String startFile) throws Exception {
        BlockingQueue<Signal> signals = new LinkedBlockingQueue<>();
        CuratorFramework client = newClient(servers, sessionMs);
        try {
            // Every recipe's lock is an InterProcessMutex (the read-write lock's halves are
            // subclasses), and InterProcessMutex is Revocable.
            InterProcessMutex lock = (InterProcessMutex) newLock(client, path, recipe);
            if (startFile != null) {
                while (!Files.exists(Paths.get(startFile))) {
                    Thread.sleep(2);
                }
            }
            if (onceThenWait) {
                Thread reader = new Thread(() -> {
                    try {
                        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                    } catch (Exception ignore) {
                        // an unreadable stdin counts as EOF
                    }
                    signals.add(Signal.STDIN); // a line or EOF releases the lock
                }, "stdin");
                reader.setDaemon(true);
                reader.start();
            }
            for (int i = 0; i < count; i++) {
                lock.makeRevocable(forWhom -> {
                    emit("REVOKED " + id + " " + recipe + " " + unixNanos());
                    signals.add(Signal.REVOKED);
                });
                acquire(lock, timeoutMs, path);
                emit("ACQ " + id + " " + recipe + " " + unixNanos());
                if (onceThenWait) {
                    signals.take();
                } else if (holdMs > 0) {
                    signals.poll(holdMs, TimeUnit.MILLISECONDS); // a revocation ends it early
                } else {
                    signals.poll(); // a revocation that came while waiting belongs to this hold
                }
                emit("REL " + id + " " + recipe + " " + unixNanos());
                lock.release();
            }
            emit("DONE " + id + " " + count);
        } finally {
            client.close();
        }
    }

    // ---------------------------------------------------------------- revoke

    /** revoke: Curator's Revoker.attemptRevoke on one lock node, as another process would. */
    private static void revoke(Args args) throws Exception {
        String servers = args.str("servers", null);
        String node = args.str("node", null);
        int sessionMs = args.integer("session-ms", 10000);
        CuratorFramework client = newClient(servers, sessionMs);
        try {
            Revoker.attemptRevoke(client, node);
            emit("DONE " + id + " 1");
        } finally {
            client.close();
        }
    }


    // ---------------------------------------------------------------- latch

    /**
     * latch: --count rounds of Curator's LeaderLatch on one session, each a new LeaderLatch (a
     * closed one cannot be started again), so each round queues at the back with a new node.
     *
     * Curator 5.4 facts this relies on (LeaderLatch.java at apache-curator-5.4.0): the listener
     * runs on the thread that changes the leadership (the default executor runs it in place, on
     * ZooKeeper's event thread or in start()), so it only queues an event for the main thread;
     * hasLeadership is set before isLeader is called, so LEAD is printed while the latch leads;
     * close() ends leadership before it deletes the node (setNode(null) is a background,
     * guaranteed delete), so RESIGN, printed before close(), comes before anyone else can lead;
     * CloseMode.SILENT clears the listeners before setLeadership(false), so a resignation never
     * calls notLeader, and NOTLEAD means that Curator itself gave leadership up.
     */
    private static void latch(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        int sessionMs = args.integer("session-ms", 10000);
        int timeoutMs = args.integer("acquire-timeout-ms", 0);
        boolean onceThenWait = args.flag("once-then-wait");
        boolean printLeader = args.flag("print-leader");
        int count = onceThenWait ? 1 : args.integer("count", 1);
        int leadMs = onceThenWait ? 0 : args.integer("lead-ms", 0);
        String startFile = args.opts.get("start-file");
        if (id.isEmpty() || id.contains(" ")) {
            throw new UsageException("--id must be a non-empty word: it is the participant id others read");
        }

        // One queue for everything that can end a wait: the latch's listener and stdin.
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CuratorFramework client = newClient(servers, sessionMs);
        try {
            if (startFile != null) {
                while (!Files.exists(Paths.get(startFile))) {
                    Thread.sleep(2);
                }
            }
            AtomicReference<LeaderLatch> current = new AtomicReference<>();
            if (onceThenWait) {
                Thread reader = new Thread(() -> {
                    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                    try {
                        String line;
                        while ((line = in.readLine()) != null && line.trim().equals("leader")) {
                            LeaderLatch l = current.get();
                            if (l != null) {
                                printLeader(client, l);
                            }
                        }
                    } catch (Exception e) {
                        emit("ERR " + id + " stdin: " + e);
                    }
                    events.add("stdin"); // any other line, or EOF, resigns
                }, "stdin");
                reader.setDaemon(true);
                reader.start();
            }
            for (int i = 0; i < count; i++) {
                LeaderLatch latch = new LeaderLatch(client, path, id, LeaderLatch.CloseMode.SILENT);
                latch.addListener(new LeaderLatchListener() {
                    @Override
                    public void isLeader() {
                        events.add("lead");
                    }

                    @Override
                    public void notLeader() {
                        events.add("notlead");
                    }
                });
                events.removeIf(e -> !e.equals("stdin")); // the last round's latch is closed and silent
                current.set(latch);
                latch.start();
                long deadline = timeoutMs > 0 ? System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs) : Long.MAX_VALUE;
                String node;
                while ((node = latch.getOurPath()) == null) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("no latch node after " + timeoutMs + "ms on " + path);
                    }
                    Thread.sleep(1);
                }
                emit("NODE " + id + " " + node);
                if (printLeader) {
                    printLeader(client, latch);
                }
                boolean leading = false;
                boolean resigned = false;
                long leadEnd = 0;
                while (!resigned) {
                    String ev;
                    if (!leading) {
                        long wait = deadline == Long.MAX_VALUE ? Long.MAX_VALUE : deadline - System.nanoTime();
                        ev = wait <= 0 ? null : events.poll(wait, TimeUnit.NANOSECONDS);
                        if (ev == null) {
                            throw new IllegalStateException("not leader after " + timeoutMs + "ms on " + path);
                        }
                    } else if (onceThenWait) {
                        ev = events.take();
                    } else {
                        ev = events.poll(Math.max(0, leadEnd - System.nanoTime()), TimeUnit.NANOSECONDS);
                        if (ev == null) {
                            ev = "done";
                        }
                    }
                    switch (ev) {
                        case "lead":
                            if (!leading && latch.hasLeadership()) {
                                leading = true;
                                emit("LEAD " + id + " latch " + unixNanos());
                                leadEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(leadMs);
                                if (printLeader) {
                                    printLeader(client, latch);
                                }
                            }
                            break;
                        case "notlead":
                            if (leading) {
                                leading = false;
                                emit("NOTLEAD " + id + " latch " + unixNanos());
                            }
                            break;
                        case "stdin":
                            if (!leading) {
                                throw new IllegalStateException("stdin closed before leading");
                            }
                            // fall through
                        case "done":
                            emit("RESIGN " + id + " latch " + unixNanos());
                            current.set(null);
                            latch.close();
                            resigned = true;
                            break;
                        default:
                            throw new IllegalStateException("event " + ev);
                    }
                }
            }
            emit("DONE " + id + " " + count);
        } finally {
            client.close();
        }
    }

    /** Prints "LEADER <id> <leader's id> <unix_nanos>", "-" when Curator reports nobody. */
    private static void printLeader(CuratorFramework client, LeaderLatch latch) throws Exception {
        Participant p = latch.getLeader();
        String leader = p.isLeader() && !p.getId().isEmpty() ? p.getId() : "-";
        emit("LEADER " + id + " " + leader.replace(' ', '_') + " " + unixNanos());
    }

    // ---------------------------------------------------------------- bench

    /** A growable list of latencies in nanoseconds, one per client thread. */
    private static final class Samples {
        long[] v = new long[1024];
        int n;

        void add(long x) {
            if (n == v.length) {
                v = Arrays.copyOf(v, n * 2);
            }
            v[n++] = x;
        }
    }

    /** In-process view of who holds the lock, to count exclusion violations. */
    private static final class Occupancy {
        final AtomicInteger holders = new AtomicInteger();
        final AtomicInteger readers = new AtomicInteger();
        final AtomicInteger writers = new AtomicInteger();
        final AtomicLong violations = new AtomicLong();
        final AtomicInteger maxReaders = new AtomicInteger();
        final AtomicInteger maxHolders = new AtomicInteger();

        static void max(AtomicInteger m, int v) {
            int cur;
            while (v > (cur = m.get()) && !m.compareAndSet(cur, v)) {
                // retry
            }
        }

        /** Called right after acquire: kind is 'm' (mutex), 'r', 'w' or 's' (semaphore). */
        void enter(char kind, int limit) {
            int h = holders.incrementAndGet();
            max(maxHolders, h);
            switch (kind) {
                case 'm':
                    if (h > 1) violations.incrementAndGet();
                    break;
                case 's':
                    if (h > limit) violations.incrementAndGet();
                    break;
                case 'r': {
                    int r = readers.incrementAndGet();
                    max(maxReaders, r);
                    if (writers.get() > 0) violations.incrementAndGet();
                    break;
                }
                case 'w': {
                    int w = writers.incrementAndGet();
                    if (w > 1 || readers.get() > 0) violations.incrementAndGet();
                    break;
                }
                default:
                    throw new IllegalArgumentException("kind " + kind);
            }
        }

        /** Called right before release. */
        void leave(char kind) {
            if (kind == 'r') readers.decrementAndGet();
            if (kind == 'w') writers.decrementAndGet();
            holders.decrementAndGet();
        }
    }

    private static void bench(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        String workload = args.str("workload", null).toUpperCase(Locale.ROOT);
        int clients = args.integer("clients", 1);
        int durationMs = args.integer("duration-ms", null);
        int leases = args.integer("leases", 3);
        final int paths = args.integer("paths", 1000);
        int readPct = args.integer("read-pct", 90);
        int sessionMs = args.integer("session-ms", 10000);
        int timeoutMs = args.integer("acquire-timeout-ms", 10000);
        final long holdNs = TimeUnit.MICROSECONDS.toNanos(args.integer("hold-us", 0));
        switch (workload) {
            case "W1":
                clients = 1;
                break;
            case "W2":
            case "W3":
            case "W4":
                break;
            case "W5":
                if (paths < 1) {
                    throw new UsageException("--paths must be at least 1");
                }
                break;
            case "W6":
                benchW6(args, servers, path, clients, durationMs, sessionMs, timeoutMs);
                return;
            default:
                throw new UsageException("--workload wants W1, W2, W3, W4, W5 or W6, got " + workload);
        }
        if (clients < 1) {
            throw new UsageException("--clients must be at least 1");
        }

        final int nClients = clients;
        final Occupancy occ = new Occupancy();
        final Samples[] samples = new Samples[nClients];
        final long[] readOps = new long[nClients];
        final long[] writeOps = new long[nClients];
        final long[] timeouts = new long[nClients];
        final Throwable[] errors = new Throwable[nClients];
        final CuratorFramework[] cfs = new CuratorFramework[nClients];
        final CountDownLatch ready = new CountDownLatch(nClients);
        final CountDownLatch go = new CountDownLatch(1);
        final long[] deadline = new long[1];
        // W5: one CuratorFramework (one session) for every thread, one
        // InterProcessMutex per path, shared by the threads (it is
        // thread-safe: each thread's hold is its own).
        final boolean w5 = workload.equals("W5");
        final CuratorFramework shared = w5 ? newClient(servers, sessionMs) : null;
        final InterProcessMutex[] perPath = w5 ? new InterProcessMutex[paths] : null;
        final AtomicIntegerArray pathHolders = w5 ? new AtomicIntegerArray(paths) : null;
        if (w5) {
            cfs[0] = shared;
            for (int i = 0; i < paths; i++) {
                perPath[i] = new InterProcessMutex(shared, String.format(Locale.ROOT, "%s/e%04d", path, i));
            }
        }

        Thread[] threads = new Thread[nClients];
        for (int c = 0; c < nClients; c++) {
            final int ci = c;
            samples[c] = new Samples();
            threads[c] = new Thread(() -> {
                try {
                    CuratorFramework client;
                    try {
                        if (w5) {
                            client = shared;
                        } else {
                            client = newClient(servers, sessionMs);
                            cfs[ci] = client;
                        }
                    } finally {
                        ready.countDown();
                    }
                    InterProcessMutex mutex = null;
                    InterProcessReadWriteLock rw = null;
                    InterProcessSemaphoreV2 sem = null;
                    if (workload.equals("W3")) {
                        rw = new InterProcessReadWriteLock(client, path);
                    } else if (workload.equals("W4")) {
                        sem = new InterProcessSemaphoreV2(client, path, leases);
                    } else if (!w5) {
                        mutex = new InterProcessMutex(client, path);
                    }
                    go.await();
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    while (System.nanoTime() < deadline[0]) {
                        if (w5) {
                            int pi = rnd.nextInt(paths);
                            long t0 = System.nanoTime();
                            boolean got = perPath[pi].acquire(timeoutMs, TimeUnit.MILLISECONDS);
                            long t1 = System.nanoTime();
                            if (!got) {
                                timeouts[ci]++;
                                continue;
                            }
                            samples[ci].add(t1 - t0);
                            if (pathHolders.incrementAndGet(pi) > 1) occ.violations.incrementAndGet();
                            pause(holdNs);
                            pathHolders.decrementAndGet(pi);
                            perPath[pi].release();
                            writeOps[ci]++;
                            continue;
                        }
                        if (sem != null) {
                            long t0 = System.nanoTime();
                            Lease lease = sem.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                            long t1 = System.nanoTime();
                            if (lease == null) {
                                timeouts[ci]++;
                                continue;
                            }
                            samples[ci].add(t1 - t0);
                            occ.enter('s', leases);
                            pause(holdNs);
                            occ.leave('s');
                            sem.returnLease(lease);
                            writeOps[ci]++;
                            continue;
                        }
                        char kind;
                        InterProcessLock lock;
                        if (rw != null) {
                            boolean read = rnd.nextInt(100) < readPct;
                            kind = read ? 'r' : 'w';
                            lock = read ? rw.readLock() : rw.writeLock();
                        } else {
                            kind = 'm';
                            lock = mutex;
                        }
                        long t0 = System.nanoTime();
                        boolean got = lock.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                        long t1 = System.nanoTime();
                        if (!got) {
                            timeouts[ci]++;
                            continue;
                        }
                        samples[ci].add(t1 - t0);
                        occ.enter(kind, 1);
                        pause(holdNs);
                        occ.leave(kind);
                        lock.release();
                        if (kind == 'r') readOps[ci]++; else writeOps[ci]++;
                    }
                } catch (Throwable t) {
                    errors[ci] = t;
                }
            }, "bench-client-" + c);
            threads[c].start();
        }
        ready.await();
        for (int c = 0; c < nClients; c++) {
            if (errors[c] != null) {
                closeAll(cfs);
                throw new IllegalStateException("client " + c + " failed to start: " + errors[c], errors[c]);
            }
        }
        long start = System.nanoTime();
        deadline[0] = start + TimeUnit.MILLISECONDS.toNanos(durationMs);
        go.countDown();
        for (Thread t : threads) {
            t.join();
        }
        long end = System.nanoTime();
        closeAll(cfs);
        for (int c = 0; c < nClients; c++) {
            if (errors[c] != null) {
                throw new IllegalStateException("client " + c + ": " + errors[c], errors[c]);
            }
        }

        int total = 0;
        for (Samples s : samples) total += s.n;
        long[] all = new long[total];
        int k = 0;
        for (Samples s : samples) {
            System.arraycopy(s.v, 0, all, k, s.n);
            k += s.n;
        }
        Arrays.sort(all);
        long reads = 0, writes = 0, tmo = 0;
        for (int c = 0; c < nClients; c++) {
            reads += readOps[c];
            writes += writeOps[c];
            tmo += timeouts[c];
        }
        double seconds = (end - start) / 1e9;
        long ops = reads + writes;
        StringBuilder sb = new StringBuilder();
        sb.append('{');
        sb.append("\"system\":\"curator\"");
        sb.append(",\"workload\":\"").append(workload).append('"');
        sb.append(",\"clients\":").append(nClients);
        if (workload.equals("W3")) sb.append(",\"read_pct\":").append(readPct);
        if (workload.equals("W4")) sb.append(",\"leases\":").append(leases);
        sb.append(",\"ops\":").append(ops);
        sb.append(",\"read_ops\":").append(reads);
        sb.append(",\"write_ops\":").append(writes);
        sb.append(",\"seconds\":").append(fmt(seconds));
        sb.append(",\"ops_per_sec\":").append(fmt(seconds > 0 ? ops / seconds : 0));
        sb.append(",\"acquire_p50_ms\":").append(fmt(percentileMs(all, 0.50)));
        sb.append(",\"acquire_p99_ms\":").append(fmt(percentileMs(all, 0.99)));
        sb.append(",\"violations\":").append(occ.violations.get());
        sb.append(",\"max_concurrent_readers\":").append(occ.maxReaders.get());
        sb.append(",\"max_concurrent_holders\":").append(occ.maxHolders.get());
        sb.append(",\"timeouts\":").append(tmo);
        sb.append('}');
        emit(sb.toString());
    }

    /**
     * W6, "read-heavy service", one process of it: --clients threads share one CuratorFramework
     * (one session) and one InterProcessReadWriteLock, and take its read side in a loop; with
     * --writer-ms P > 0, a writer thread on a CuratorFramework of its own takes the write side
     * every P ms and holds it --writer-hold-us. zkbench runs several such processes on one path,
     * one of them with the writer, all starting their clocks at --start-at-ms (Unix ms, the wall
     * clock), so that their spans coincide. The JSON line adds the writer's acquire wait
     * (writer_p50_ms, writer_p99_ms); timeouts are the writer's acquires that took over
     * --acquire-timeout-ms.
     */
    private static void benchW6(Args args, String servers, String path, int threads, int durationMs,
            int sessionMs, int timeoutMs) throws Exception {
        int writerMs = args.integer("writer-ms", 0);
        long writerHoldNs = TimeUnit.MICROSECONDS.toNanos(args.integer("writer-hold-us", 1000));
        long startAt = Long.parseLong(args.str("start-at-ms", "0"));
        if (threads < 1) {
            throw new UsageException("--clients must be at least 1");
        }
        final Occupancy occ = new Occupancy();
        final long[] reads = new long[threads];
        final Throwable[] errors = new Throwable[threads + 1];
        final CuratorFramework shared = newClient(servers, sessionMs);
        final CuratorFramework wcf = writerMs > 0 ? newClient(servers, sessionMs) : null;
        final InterProcessReadWriteLock rw = new InterProcessReadWriteLock(shared, path);
        final InterProcessReadWriteLock wrw = wcf != null ? new InterProcessReadWriteLock(wcf, path) : null;
        final Samples waits = new Samples();
        final long[] writes = new long[1];
        final long[] wtimeouts = new long[1];
        long sleepMs = startAt - System.currentTimeMillis();
        if (sleepMs > 0) {
            Thread.sleep(sleepMs);
        }
        final long start = System.nanoTime();
        final long deadline = start + TimeUnit.MILLISECONDS.toNanos(durationMs);
        Thread[] ts = new Thread[threads + 1];
        for (int c = 0; c < threads; c++) {
            final int ci = c;
            ts[c] = new Thread(() -> {
                try {
                    InterProcessLock lock = rw.readLock();
                    while (System.nanoTime() < deadline) {
                        if (!lock.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                            continue;
                        }
                        occ.enter('r', 1);
                        occ.leave('r');
                        lock.release();
                        reads[ci]++;
                    }
                } catch (Throwable t) {
                    errors[ci] = t;
                }
            }, "w6-reader-" + c);
        }
        if (wrw != null) {
            ts[threads] = new Thread(() -> {
                try {
                    InterProcessLock lock = wrw.writeLock();
                    long next = start + TimeUnit.MILLISECONDS.toNanos(writerMs);
                    while (true) {
                        long now = System.nanoTime();
                        if (next > now) {
                            TimeUnit.NANOSECONDS.sleep(next - now);
                        }
                        next += TimeUnit.MILLISECONDS.toNanos(writerMs);
                        if (System.nanoTime() >= deadline) {
                            break;
                        }
                        long t0 = System.nanoTime();
                        boolean got = lock.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                        long t1 = System.nanoTime();
                        if (!got) {
                            wtimeouts[0]++;
                            continue;
                        }
                        waits.add(t1 - t0);
                        occ.enter('w', 1);
                        pause(writerHoldNs);
                        occ.leave('w');
                        lock.release();
                        writes[0]++;
                    }
                } catch (Throwable t) {
                    errors[threads] = t;
                }
            }, "w6-writer");
        }
        for (Thread t : ts) {
            if (t != null) t.start();
        }
        for (Thread t : ts) {
            if (t != null) t.join();
        }
        long end = System.nanoTime();
        closeAll(new CuratorFramework[] {shared, wcf});
        for (int c = 0; c <= threads; c++) {
            if (errors[c] != null) {
                throw new IllegalStateException((c == threads ? "writer" : "reader " + c) + ": " + errors[c], errors[c]);
            }
        }
        long r = 0;
        for (long n : reads) r += n;
        long[] all = Arrays.copyOf(waits.v, waits.n);
        Arrays.sort(all);
        double seconds = (end - start) / 1e9;
        StringBuilder sb = new StringBuilder();
        sb.append('{');
        sb.append("\"system\":\"curator\"");
        sb.append(",\"workload\":\"W6\"");
        sb.append(",\"clients\":").append(threads);
        sb.append(",\"ops\":").append(r + writes[0]);
        sb.append(",\"read_ops\":").append(r);
        sb.append(",\"write_ops\":").append(writes[0]);
        sb.append(",\"seconds\":").append(fmt(seconds));
        sb.append(",\"ops_per_sec\":").append(fmt(seconds > 0 ? (r + writes[0]) / seconds : 0));
        sb.append(",\"writer_p50_ms\":").append(fmt(percentileMs(all, 0.50)));
        sb.append(",\"writer_p99_ms\":").append(fmt(percentileMs(all, 0.99)));
        sb.append(",\"violations\":").append(occ.violations.get());
        sb.append(",\"max_concurrent_readers\":").append(occ.maxReaders.get());
        sb.append(",\"timeouts\":").append(wtimeouts[0]);
        sb.append('}');
        emit(sb.toString());
    }

    // ---------------------------------------------------------------- drain

    /**
     * drain: zkbench's deep queue, for Curator. --clients CuratorFrameworks (sessions); the first
     * holders (one for --recipe mutex, --leases for semaphore, InterProcessSemaphoreV2) take the
     * lock on clients 0, 1, ...; --waiters threads, waiter i on client i % --clients, queue behind
     * them; the holders let go; each waiter takes the lock once and lets go at once, but the last,
     * which holds until told. Each waiter has a lock object of its own (InterProcessMutex,
     * InterProcessSemaphoreV2) on its client, as independent callers would: threads that share
     * one InterProcessMutex also share its watcher, whose notifyAll wakes every one of them at
     * each release (LockInternals.watcher), a thundering herd of their own making that the
     * issue's baseline does not have. zkbench reads the server's counters between the steps, so each
     * step waits for a line on stdin:
     *
     *   peer: HELD <id>                  the first holders hold
     *   zkbench: queue                   start the waiters
     *   peer: QUEUING <id> <D>           every waiter thread has started (zkbench then watches
     *                                    the server until they are all queued)
     *   zkbench: release                 the holders let go: the drain starts
     *   peer: DRAINED <id> <ns>          the D-th waiter holds, ns after the release began
     *   zkbench: finish                  the last holder lets go
     *   peer: {JSON}                     handoffs, chain_seconds, handoff_p50_ms, handoff_p99_ms,
     *                                    violations (holders over 1, or over --leases)
     */
    private static void drain(Args args) throws Exception {
        String servers = args.str("servers", null);
        String path = args.str("path", null);
        String recipe = args.str("recipe", null);
        int waiters = args.integer("waiters", null);
        int nClients = args.integer("clients", null);
        int leases = args.integer("leases", 10);
        int sessionMs = args.integer("session-ms", 30000);
        boolean sem = recipe.equals("semaphore");
        if (!sem && !recipe.equals("mutex")) {
            throw new UsageException("--recipe wants mutex or semaphore, got " + recipe);
        }
        if (waiters < 1 || nClients < 1 || leases < 1) {
            throw new UsageException("--waiters, --clients and --leases must be at least 1");
        }
        final int holders = sem ? leases : 1;
        final char kind = sem ? 's' : 'm';
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        CuratorFramework[] cfs = new CuratorFramework[nClients];
        try {
            for (int c = 0; c < nClients; c++) {
                cfs[c] = newClient(servers, sessionMs);
            }
            // The first holders: the mutex on a lock object of its own (Curator ties a hold to
            // the thread that took it: this one), or the semaphore's leases.
            InterProcessMutex firstMutex = sem ? null : new InterProcessMutex(cfs[0], path);
            List<Lease> firstLeases = new ArrayList<>();
            if (sem) {
                for (int h = 0; h < holders; h++) {
                    firstLeases.add(new InterProcessSemaphoreV2(cfs[h % nClients], path, leases).acquire());
                }
            } else {
                firstMutex.acquire();
            }
            final Occupancy occ = new Occupancy();
            for (int h = 0; h < holders; h++) {
                occ.enter(kind, leases);
            }
            emit("HELD " + id);
            expectLine(stdin, "queue");

            final long[] at = new long[waiters]; // nanoTime of each acquisition, in order
            final AtomicInteger acquired = new AtomicInteger();
            final CountDownLatch lastHeld = new CountDownLatch(1);
            final CountDownLatch finish = new CountDownLatch(1);
            final AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread[] threads = new Thread[waiters];
            for (int i = 0; i < waiters; i++) {
                final CuratorFramework client = cfs[i % nClients];
                final InterProcessMutex mutex = sem ? null : new InterProcessMutex(client, path);
                threads[i] = new Thread(null, () -> {
                    try {
                        Lease lease = null;
                        if (sem) {
                            lease = new InterProcessSemaphoreV2(client, path, leases).acquire();
                        } else {
                            mutex.acquire();
                        }
                        int k = acquired.incrementAndGet();
                        at[k - 1] = System.nanoTime();
                        occ.enter(kind, leases);
                        if (k == waiters) {
                            lastHeld.countDown();
                            finish.await();
                        }
                        occ.leave(kind);
                        if (sem) {
                            lease.close();
                        } else {
                            mutex.release();
                        }
                    } catch (Throwable t) {
                        failure.compareAndSet(null, t);
                        lastHeld.countDown();
                    }
                }, "drain-" + i, 256 * 1024);
                threads[i].setDaemon(true);
                threads[i].start();
            }
            emit("QUEUING " + id + " " + waiters);
            expectLine(stdin, "release");

            long t0 = System.nanoTime();
            for (int h = 0; h < holders; h++) {
                occ.leave(kind);
            }
            if (sem) {
                for (Lease l : firstLeases) {
                    l.close();
                }
            } else {
                firstMutex.release();
            }
            lastHeld.await();
            if (failure.get() != null) {
                throw new IllegalStateException("waiter: " + failure.get(), failure.get());
            }
            emit("DRAINED " + id + " " + (at[waiters - 1] - t0));
            expectLine(stdin, "finish");
            finish.countDown();
            for (Thread t : threads) {
                t.join();
            }
            if (failure.get() != null) {
                throw new IllegalStateException("waiter: " + failure.get(), failure.get());
            }
            emit(drainResult(recipe, nClients, waiters, leases, t0, at, occ));
        } finally {
            closeAll(cfs);
        }
    }

    /** Reads the next stdin line and fails unless it is want. */
    private static void expectLine(BufferedReader in, String want) throws Exception {
        String line = in.readLine();
        if (line == null || !line.trim().equals(want)) {
            throw new IllegalStateException("stdin: want " + want + ", got " + line);
        }
    }

    /** drain's JSON line: the gaps between consecutive acquisitions, the first from the release. */
    private static String drainResult(String recipe, int nClients, int waiters, int leases, long t0, long[] at,
            Occupancy occ) {
        long[] gaps = new long[waiters];
        long prev = t0;
        for (int i = 0; i < waiters; i++) {
            gaps[i] = at[i] - prev;
            prev = at[i];
        }
        Arrays.sort(gaps);
        double seconds = (at[waiters - 1] - t0) / 1e9;
        StringBuilder sb = new StringBuilder();
        sb.append('{');
        sb.append("\"system\":\"curator\"");
        sb.append(",\"recipe\":\"").append(recipe).append('"');
        sb.append(",\"clients\":").append(nClients);
        sb.append(",\"waiters\":").append(waiters);
        sb.append(",\"leases\":").append(recipe.equals("semaphore") ? leases : 1);
        sb.append(",\"handoffs\":").append(waiters);
        sb.append(",\"chain_seconds\":").append(String.format(Locale.ROOT, "%.6f", seconds));
        sb.append(",\"handoffs_per_sec\":").append(fmt(seconds > 0 ? waiters / seconds : 0));
        sb.append(",\"handoff_p50_ms\":").append(fmt(percentileMs(gaps, 0.50)));
        sb.append(",\"handoff_p99_ms\":").append(fmt(percentileMs(gaps, 0.99)));
        sb.append(",\"violations\":").append(occ.violations.get());
        sb.append('}');
        return sb.toString();
    }

    /** Simulated work inside the critical section (widens the window the overlap counter sees). */
    private static void pause(long ns) {
        if (ns > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(ns);
        }
    }

    private static void closeAll(CuratorFramework[] cfs) {
        for (CuratorFramework cf : cfs) {
            if (cf != null) {
                try {
                    cf.close();
                } catch (Throwable ignore) {
                    // best effort
                }
            }
        }
    }

    /** Nearest-rank percentile of sorted nanosecond samples, in milliseconds. */
    private static double percentileMs(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(p * sorted.length);
        int idx = Math.min(Math.max(rank - 1, 0), sorted.length - 1);
        return sorted[idx] / 1e6;
    }

    private static String fmt(double d) {
        return String.format(Locale.ROOT, "%.3f", d);
    }
}
