#!/usr/bin/python3
"""kazoo lock peer for zklock interoperability tests and benchmarks.

Runs with Debian's /usr/bin/python3 and python3-kazoo (kazoo 2.8). Same command line and output
format as tools/peers/java/ZkPeer.java:

  zkpeer.py hold  --servers H:P --path /p --recipe mutex|read|write|semaphore --count N --hold-ms M
                  --id NAME [--session-ms 10000] [--start-file F] [--once-then-wait]
                  [--acquire-timeout-ms 0] [--node-names native|curator] [--kazoo-rw-fix]
                  [--leases 3]
  zkpeer.py version [--id NAME]
  zkpeer.py bench --servers H:P --path /p --workload W1|W2|W3|W4 --clients C --duration-ms D
                  [--leases 3] [--read-pct 90] [--session-ms 10000] [--acquire-timeout-ms 10000]
                  [--hold-us 0] [--node-names native|curator] [--kazoo-rw-fix]

Node names (--node-names):
  native  (default) stock kazoo recipes and node names ("<32hex>__lock__<seq>",
          "<32hex>__rlock__<seq>"), created with extra_lock_patterns so that kazoo also waits for
          Curator-format nodes: Lock: ["-lock-"]; ReadLock: ["__WRIT__"];
          WriteLock: ["__READ__", "__WRIT__"].
  curator kazoo recipes subclassed to create Curator-format nodes ("_c_<uuid>-lock-<seq>",
          "_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>") that Curator, in turn, sorts by
          sequence and honours. Their predecessor rule only looks at lower sequence numbers.
--recipe semaphore holds one lease of kazoo's Semaphore(path, identifier=id, max_leases=--leases)
per round (its own layout: a Lock at <path>-__lock__, leases <path>/<32hex>).
--kazoo-rw-fix gives the stock ReadLock/WriteLock that same predecessor rule (the fix of
kazoo PR #650, released in kazoo 2.9): kazoo 2.8's ReadLock waits for the highest-sequenced
writer present, even one queued after it, which can deadlock with that writer (kazoo #649).
"""

import argparse
import json
import os
import random
import sys
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.recipe.lock import Lock, ReadLock, Semaphore, WriteLock
from kazoo.retry import ForceRetryError

# extra_lock_patterns that make stock kazoo recipes honour Curator-format nodes. kazoo builds
# the regex "(?:<patterns>)(-?\d{10})$" from them, so each pattern must end exactly where the
# 10-digit sequence starts: "-lock-", not "lock" or "-lock" (those would capture "-0000000042",
# which sorts as a string before every "0..." sequence and so ahead of all kazoo nodes).
CURATOR_MUTEX_PATTERNS = ["-lock-"]
CURATOR_READ_PATTERNS = ["__WRIT__"]  # a reader waits only for writers
CURATOR_WRITE_PATTERNS = ["__READ__", "__WRIT__"]  # a writer waits for everyone

_out_lock = threading.Lock()
_peer_id = "peer"


def emit(line):
    """Write one line to stdout and flush it at once; lines never interleave."""
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _lower_sequence_predecessor(self, node):
    """Predecessor = the highest-sequenced excluding contender with a LOWER sequence number.

    This is ZooKeeper's lock recipe, and what kazoo 2.9 does after PR #650. kazoo 2.8 instead
    returns the last excluding contender in the whole list when its own node is not itself an
    excluding name (every ReadLock), so a reader may wait for a writer queued after it.
    """
    children = self.client.get_children(self.path)
    if node not in children:
        # Our ephemeral node vanished (session loss): let kazoo's retry recreate it.
        raise ForceRetryError()
    # Our sequence is what follows our own prefix. (A regex like "(-?\d{10})$" would be wrong:
    # search() takes the leftmost match, "-0000000042" for "..-lock-0000000042".)
    own_seq = node[len(self.prefix):]
    best = None
    for child in children:
        match = self._contenders_re.search(child)
        if match is None or child == node:
            continue
        seq = match.group(1)
        if seq < own_seq and (best is None or seq > best[0]):
            best = (seq, child)
    return None if best is None else best[1]


class FixedReadLock(ReadLock):
    _get_predecessor = _lower_sequence_predecessor


class FixedWriteLock(WriteLock):
    _get_predecessor = _lower_sequence_predecessor


class _CuratorNamed(object):
    """Mixin: create Curator's protected node name _c_<36-char uuid>-<lock name><seq>."""

    _EXTRA = ()

    def __init__(self, client, path, identifier=None):
        super(_CuratorNamed, self).__init__(client, path, identifier)
        self.prefix = "_c_" + str(uuid.uuid4()) + self._NODE_NAME
        self.create_path = self.path + "/" + self.prefix

    _get_predecessor = _lower_sequence_predecessor


class CuratorNamedMutex(_CuratorNamed, Lock):
    _NODE_NAME = "-lock-"  # "_c_<uuid>-lock-<seq>", as InterProcessMutex
    _EXCLUDE_NAMES = ["-lock-", "__lock__"]


class CuratorNamedReadLock(_CuratorNamed, Lock):
    _NODE_NAME = "-__READ__"  # "_c_<uuid>-__READ__<seq>", as InterProcessReadWriteLock
    _EXCLUDE_NAMES = ["__WRIT__", "__lock__"]


class CuratorNamedWriteLock(_CuratorNamed, Lock):
    _NODE_NAME = "-__WRIT__"
    _EXCLUDE_NAMES = ["__READ__", "__WRIT__", "__lock__", "__rlock__"]


def new_lock(zk, path, recipe, ident, node_names, rw_fix, leases=3):
    if recipe == "semaphore":
        return Semaphore(zk, path, ident, max_leases=leases)
    if node_names == "curator":
        cls = {"mutex": CuratorNamedMutex, "read": CuratorNamedReadLock,
               "write": CuratorNamedWriteLock}.get(recipe)
        if cls is None:
            raise UsageError("--recipe wants mutex, read or write, got %s" % recipe)
        return cls(zk, path, ident)
    if recipe == "mutex":
        return Lock(zk, path, ident, extra_lock_patterns=CURATOR_MUTEX_PATTERNS)
    if recipe == "read":
        cls = FixedReadLock if rw_fix else ReadLock
        return cls(zk, path, ident, extra_lock_patterns=CURATOR_READ_PATTERNS)
    if recipe == "write":
        cls = FixedWriteLock if rw_fix else WriteLock
        return cls(zk, path, ident, extra_lock_patterns=CURATOR_WRITE_PATTERNS)
    raise UsageError("--recipe wants mutex, read or write, got %s" % recipe)


def new_client(servers, session_ms):
    zk = KazooClient(hosts=servers, timeout=session_ms / 1000.0)
    zk.start(timeout=30)
    return zk


def close_client(zk):
    try:
        zk.stop()
        zk.close()
    except Exception:  # best effort
        pass


def acquire(lock, timeout_ms, path):
    """Blocks until acquired; raises on timeout (timeout_ms > 0) or error."""
    if timeout_ms > 0:
        try:
            got = lock.acquire(timeout=timeout_ms / 1000.0)
        except LockTimeout:
            got = False
        if not got:
            raise RuntimeError("acquire timed out after %dms on %s" % (timeout_ms, path))
    else:
        if not lock.acquire():
            raise RuntimeError("acquire returned False on %s" % path)


# ----------------------------------------------------------------------------------- hold

def hold(a):
    zk = new_client(a.servers, a.session_ms)
    try:
        lock = new_lock(zk, a.path, a.recipe, a.id, a.node_names, a.kazoo_rw_fix, a.leases)
        if a.start_file:
            while not os.path.exists(a.start_file):
                time.sleep(0.002)
        count = 1 if a.once_then_wait else a.count
        for _ in range(count):
            acquire(lock, a.acquire_timeout_ms, a.path)
            emit("ACQ %s %s %d" % (a.id, a.recipe, time.time_ns()))
            if a.once_then_wait:
                sys.stdin.readline()  # a line or EOF releases the lock
            elif a.hold_ms > 0:
                time.sleep(a.hold_ms / 1000.0)
            emit("REL %s %s %d" % (a.id, a.recipe, time.time_ns()))
            lock.release()
        emit("DONE %s %d" % (a.id, count))
    finally:
        close_client(zk)


# ----------------------------------------------------------------------------------- bench

class Occupancy(object):
    """In-process view of who holds the lock, to count exclusion violations."""

    def __init__(self):
        self.mu = threading.Lock()
        self.holders = self.readers = self.writers = 0
        self.violations = self.max_readers = self.max_holders = 0

    def enter(self, kind, limit):
        with self.mu:
            self.holders += 1
            self.max_holders = max(self.max_holders, self.holders)
            if kind == "m" and self.holders > 1:
                self.violations += 1
            elif kind == "s" and self.holders > limit:
                self.violations += 1
            elif kind == "r":
                self.readers += 1
                self.max_readers = max(self.max_readers, self.readers)
                if self.writers > 0:
                    self.violations += 1
            elif kind == "w":
                self.writers += 1
                if self.writers > 1 or self.readers > 0:
                    self.violations += 1

    def leave(self, kind):
        with self.mu:
            if kind == "r":
                self.readers -= 1
            elif kind == "w":
                self.writers -= 1
            self.holders -= 1


def percentile_ms(sorted_ns, p):
    """Nearest-rank percentile of sorted nanosecond samples, in milliseconds."""
    if not sorted_ns:
        return 0.0
    rank = -(-int(p * 1000) * len(sorted_ns) // 1000)  # ceil(p * n) without float error
    idx = min(max(rank - 1, 0), len(sorted_ns) - 1)
    return sorted_ns[idx] / 1e6


def bench(a):
    workload = a.workload.upper()
    if workload not in ("W1", "W2", "W3", "W4"):
        raise UsageError("--workload wants W1, W2, W3 or W4, got %s" % a.workload)
    clients = 1 if workload == "W1" else a.clients
    if clients < 1:
        raise UsageError("--clients must be at least 1")
    timeout_s = a.acquire_timeout_ms / 1000.0 if a.acquire_timeout_ms > 0 else None
    hold_s = a.hold_us / 1e6

    occ = Occupancy()
    ready = threading.Barrier(clients + 1)
    go = threading.Event()
    state = {"deadline": 0.0}
    results = [None] * clients
    errors = [None] * clients
    zks = [None] * clients

    def client_main(ci):
        samples, reads, writes, timeouts = [], 0, 0, 0
        try:
            try:
                zk = zks[ci] = new_client(a.servers, a.session_ms)
                ident = "%s-%d" % (a.id, ci)
                if workload == "W3":
                    rlock = new_lock(zk, a.path, "read", ident, a.node_names, a.kazoo_rw_fix)
                    wlock = new_lock(zk, a.path, "write", ident, a.node_names, a.kazoo_rw_fix)
                elif workload == "W4":
                    sem = zk.Semaphore(a.path, ident, max_leases=a.leases)
                else:
                    mutex = new_lock(zk, a.path, "mutex", ident, a.node_names, a.kazoo_rw_fix)
            finally:
                ready.wait()
            go.wait()
            rnd = random.Random()
            perf = time.perf_counter_ns
            while time.monotonic() < state["deadline"]:
                if workload == "W4":
                    lock, kind = sem, "s"
                elif workload == "W3":
                    if rnd.randrange(100) < a.read_pct:
                        lock, kind = rlock, "r"
                    else:
                        lock, kind = wlock, "w"
                else:
                    lock, kind = mutex, "m"
                t0 = perf()
                try:
                    got = lock.acquire(timeout=timeout_s)
                except LockTimeout:
                    got = False
                t1 = perf()
                if not got:
                    timeouts += 1
                    continue
                samples.append(t1 - t0)
                occ.enter(kind, a.leases)
                if hold_s > 0:
                    time.sleep(hold_s)
                occ.leave(kind)
                lock.release()
                if kind == "r":
                    reads += 1
                else:
                    writes += 1
        except BaseException as e:  # reported by the main thread
            errors[ci] = e
        results[ci] = (samples, reads, writes, timeouts)

    threads = [threading.Thread(target=client_main, args=(ci,), daemon=True,
                                name="bench-client-%d" % ci) for ci in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    for ci, e in enumerate(errors):
        if e is not None:
            go.set()
            for zk in zks:
                if zk is not None:
                    close_client(zk)
            raise RuntimeError("client %d failed to start: %r" % (ci, e))
    start = time.monotonic()
    state["deadline"] = start + a.duration_ms / 1000.0
    go.set()
    for t in threads:
        t.join()
    end = time.monotonic()
    for zk in zks:
        if zk is not None:
            close_client(zk)
    for ci, e in enumerate(errors):
        if e is not None:
            raise RuntimeError("client %d: %r" % (ci, e))

    all_ns = sorted(s for r in results for s in r[0])
    reads = sum(r[1] for r in results)
    writes = sum(r[2] for r in results)
    timeouts = sum(r[3] for r in results)
    seconds = end - start
    ops = reads + writes
    out = {"system": "kazoo", "workload": workload, "clients": clients}
    if workload == "W3":
        out["read_pct"] = a.read_pct
    if workload == "W4":
        out["leases"] = a.leases
    out.update({
        "ops": ops,
        "read_ops": reads,
        "write_ops": writes,
        "seconds": round(seconds, 3),
        "ops_per_sec": round(ops / seconds if seconds > 0 else 0.0, 3),
        "acquire_p50_ms": round(percentile_ms(all_ns, 0.50), 3),
        "acquire_p99_ms": round(percentile_ms(all_ns, 0.99), 3),
        "violations": occ.violations,
        "max_concurrent_readers": occ.max_readers,
        "max_concurrent_holders": occ.max_holders,
        "timeouts": timeouts,
    })
    emit(json.dumps(out, separators=(",", ":")))


# ----------------------------------------------------------------------------------- main

def parse(argv):
    p = _Parser(prog="zkpeer.py", add_help=False)
    p.add_argument("mode", choices=["hold", "bench"])
    p.add_argument("--servers", required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--id", default="peer")
    p.add_argument("--session-ms", type=int, default=10000)
    p.add_argument("--acquire-timeout-ms", type=int, default=None)
    p.add_argument("--node-names", choices=["native", "curator"], default="native")
    p.add_argument("--kazoo-rw-fix", action="store_true")
    # hold
    p.add_argument("--recipe", choices=["mutex", "read", "write", "semaphore"])
    p.add_argument("--count", type=int)
    p.add_argument("--hold-ms", type=int)
    p.add_argument("--start-file")
    p.add_argument("--once-then-wait", action="store_true")
    # bench
    p.add_argument("--workload")
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--duration-ms", type=int)
    p.add_argument("--leases", type=int, default=3)
    p.add_argument("--read-pct", type=int, default=90)
    p.add_argument("--hold-us", type=int, default=0)
    a = p.parse_args(argv)
    if a.mode == "hold":
        if a.recipe is None:
            raise UsageError("missing required option --recipe")
        if not a.once_then_wait:
            if a.count is None:
                raise UsageError("missing required option --count")
            if a.hold_ms is None:
                raise UsageError("missing required option --hold-ms")
        if a.acquire_timeout_ms is None:
            a.acquire_timeout_ms = 0
    else:
        if a.workload is None:
            raise UsageError("missing required option --workload")
        if a.duration_ms is None:
            raise UsageError("missing required option --duration-ms")
        if a.acquire_timeout_ms is None:
            a.acquire_timeout_ms = 10000
    return a


def version():
    """Print "VERSION <id> kazoo <version> python <version>": the kazoo this interpreter imports
    (Debian's 2.8 from /usr/lib/python3/dist-packages, or another put first on PYTHONPATH, as
    build-peers.sh does for trixie's 2.9)."""
    import platform

    import kazoo.version

    emit("VERSION %s kazoo %s python %s" % (_peer_id, kazoo.version.__version__, platform.python_version()))


def main(argv):
    global _peer_id
    # Best-effort id for ERR lines even when parsing fails.
    if "--id" in argv[:-1]:
        _peer_id = argv[argv.index("--id") + 1]
    try:
        if argv[:1] == ["version"]:
            version()
            return 0
        a = parse(argv)
        _peer_id = a.id
        if a.mode == "hold":
            hold(a)
        else:
            bench(a)
    except BaseException as e:
        if isinstance(e, SystemExit) and not e.code:
            return 0
        msg = "%s: %s" % (type(e).__name__, e)
        emit("ERR %s %s" % (_peer_id, msg.replace("\n", " ").replace("\r", " ")))
        return 1
    return 0


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    sys.stdout.flush()
    # kazoo's connection threads are daemons, but skip interpreter teardown races anyway.
    os._exit(rc)
