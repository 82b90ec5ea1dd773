// Package zklock provides distributed locks on Apache ZooKeeper, wire-compatible
// with Apache Curator's recipes, with fencing tokens and lock loss reported first.
//
// # Recipes
//
// Every recipe is a [Driver] on one engine ([Lock], after Curator's
// LockInternals): each acquire creates a protected ephemeral-sequential node
// under the lock path and holds when the driver says so; waiters watch only
// the sibling the driver names.
//
//	zklock                 Apache Curator                          node under the lock path
//	Mutex                  InterProcessMutex                       _c_<uuid>-lock-<seq>
//	RWMutex.ReadLock()     InterProcessReadWriteLock.readLock()    _c_<uuid>-__READ__<seq>
//	RWMutex.WriteLock()    InterProcessReadWriteLock.writeLock()   _c_<uuid>-__WRIT__<seq>
//	Semaphore (+AcquireN)  (InterProcessSemaphoreV2: other layout) _c_<uuid>-lease-<seq>
//	MultiLock              InterProcessMultiLock (can deadlock)    _c_<uuid>-lock-<seq> on each path
//	Election               LeaderLatch                             _c_<uuid>-latch-<seq>
//	NewLock(c, p, driver)  LockInternals + LockInternalsDriver     one of the above kinds
//
// All of them are first come, first served across every process on the path,
// and none is reentrant or tied to a goroutine. Start with [Connect], then
// [NewMutex]; [Do] runs a function under a lock. An [Election]'s leadership
// is a [Lease] like a lock's: [Election.Campaign] waits until it leads,
// [Election.Lead] runs a function while it leads, [Election.Leader] and
// [Election.Observe] tell who leads. [Participants]
// lists who holds and who waits on any lock path, whichever recipe or
// library made it.
//
// # Lock loss
//
// Holding is never guaranteed. Every [Lease] has a deadline,
// [Lease.ValidUntil]: the time before which no ZooKeeper leader can have
// expired its session, by what the quorum has confirmed; the Client keeps
// moving it forward while it can. A lease ends when it is released, and is
// lost when its deadline passes first ([ErrLeaseExpired]), when the session
// expires ([ErrSessionExpired]) or when the [Client] is closed
// ([ErrClientClosed]). A disconnect alone does not end it, unless the Client
// was made [WithLossOnDisconnect] ([ErrConnectionSuspended]). [Lease.Done] is
// closed then and [Lease.Err] says why, once and for good; Err also checks
// the clock itself, so a process paused past the deadline sees the loss on
// its first look. The context [Do] passes to its function is cancelled then
// too.
//
// # Fencing
//
// [Lease.Token] is a zxid: the lock path's latest child change (its pzxid)
// in the read that decided the lease holds. Tokens strictly
// increase across successive conflicting holders of a path, so a resource
// that remembers the highest token it has seen can refuse a stale holder:
// the only protection that survives a holder paused past its session. A
// function under [Do] or [Election.Lead] gets its lease with [LeaseFrom].
// Tokens are per path, go back when the ensemble is rebuilt, and Curator and
// kazoo holders have none: [Lease.Token] says what that asks of the resource.
//
// # Errors and cleanup
//
// Every error a call returns is an [*OpError], whose cause wraps one
// sentinel ([ErrInvalidArgument], [ErrLocked], ...), a context error or a
// go-zookeeper error; it writes one prefix that says what and where:
// "zklock: try acquire /locks/a: locked". Bad input fails before any
// ZooKeeper call. An acquire that fails or is cancelled leaves no node: a
// cleanup that does not depend on its context deletes it while the session
// lives.
//
// # Security
//
// A lock is only as safe as the ACL on its path: whoever may delete a
// node under it may break the lock. [WithTLS] connects to ZooKeeper's
// secureClientPort, and a client certificate is the Client's x509
// identity; [WithAuth] sends digest credentials; [WithACL] and
// [WithACLProvider] set the ACL of the nodes the Client creates. An
// acquire on a path the Client may not write fails at once with an error
// wrapping zk.ErrNoAuth and leaves nothing behind.
package zklock
