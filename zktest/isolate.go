package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// quorumPorts are the ports of every server's quorum (2888) and leader
// election (3888) traffic, as RunEnsemble's server list sets them.
var quorumPorts = [...]int{2888, 3888}

// isolation records what Isolate did to one server, for Heal to undo exactly
// that.
type isolation struct {
	pid     int
	netns   string // /proc/pid/ns/net's link: the namespace the rules are in
	subnets []netip.Prefix
}

// Isolate cuts server i (0 <= i < [EnsembleSize], as in [Ensemble.Node]) off
// from the other servers, as a network partition would, while its clients
// still reach it: every TCP packet on the quorum and election ports (2888 and
// 3888) between server i and the ensemble's network is dropped, both ways,
// and the client port is left alone. Packets vanish, nothing is refused, so
// each side only notices through its own timeouts.
//
// What follows is ZooKeeper's doing, at the ensemble's timing:
//
//   - An isolated follower keeps its clients' connections and keeps answering
//     their heartbeats and reads, but cannot commit a write, until it has
//     heard nothing from the leader for syncLimit ticks (2s by default, 10s
//     at ZooKeeper's own tickTime=2000 and syncLimit=5). It then stops
//     serving: it closes its clients' connections and refuses new ones until
//     it rejoins. Meanwhile the leader stops hearing about those clients, and
//     expires their sessions once their timeout passes, however well
//     connected they seem.
//   - An isolated leader steps down after syncLimit ticks without a quorum of
//     followers, and stops serving likewise; the other two elect a new leader
//     among themselves once they have missed the old one for syncLimit ticks.
//
// Isolate returns once the rules are in place; it does not wait for any of
// this. It does nothing if server i is isolated already. [Ensemble.Heal]
// undoes it, and so do [Ensemble.Restart] and [Ensemble.Rebuild]; so does
// stopping or killing the server, whose rules go with its network namespace.
//
// The rules go into server i's own network namespace, entered from this
// machine with nsenter as the container's main process, so the image needs
// nothing and the container no extra capability. This needs a local Docker
// engine whose containers are processes of this machine (not Docker Desktop's
// virtual machine, nor a remote engine), root, and on the PATH (or in
// /usr/sbin or /sbin) nsenter (util-linux) and iptables-restore (iptables;
// ip6tables-restore too if the network has IPv6). When it cannot do that,
// Isolate returns an error wrapping errors.ErrUnsupported and changes
// nothing. ctx bounds the Docker calls and the commands.
func (e *Ensemble) Isolate(ctx context.Context, i int) error {
	c := e.Node(i)
	if c == nil {
		return fmt.Errorf("zktest: isolate server %d: no such server (0..%d)", i, len(e.nodes)-1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	pid, netns, err := netnsOf(ctx, c)
	if err != nil {
		return fmt.Errorf("zktest: isolate %s: %w", c.endpoint, err)
	}
	if iso, ok := e.isolated[i]; ok && iso.netns == netns {
		return nil
	}
	subnets, err := e.subnets(ctx)
	if err != nil {
		return fmt.Errorf("zktest: isolate %s: %w", c.endpoint, err)
	}
	if err := filter(ctx, pid, "-I", subnets); err != nil {
		return fmt.Errorf("zktest: isolate %s: %w", c.endpoint, err)
	}
	if e.isolated == nil {
		e.isolated = make(map[int]isolation)
	}
	e.isolated[i] = isolation{pid: pid, netns: netns, subnets: subnets}
	return nil
}

// Heal undoes [Ensemble.Isolate]: it removes the rules Isolate added to
// server i, and only those. It does nothing if server i is not isolated, or
// if its container has stopped or restarted since Isolate (its rules went
// with it). It returns once the rules are gone, without waiting for the
// server to rejoin: a server that stepped down finds the leader at its next
// election attempt, within about a second with the ensemble's defaults, and
// then serves again as a follower; wait for that with [Container.FourLetter]
// ("srvr" says "Mode: follower"). ctx bounds the Docker calls and the
// commands; on error the rules may still be there, and Heal can be called
// again.
func (e *Ensemble) Heal(ctx context.Context, i int) error {
	c := e.Node(i)
	if c == nil {
		return fmt.Errorf("zktest: heal server %d: no such server (0..%d)", i, len(e.nodes)-1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	iso, ok := e.isolated[i]
	if !ok {
		return nil
	}
	pid, netns, err := netnsOf(ctx, c)
	if err != nil && !errors.Is(err, errNotRunning) {
		return fmt.Errorf("zktest: heal %s: %w", c.endpoint, err)
	}
	if err == nil && pid == iso.pid && netns == iso.netns {
		if err := filter(ctx, pid, "-D", iso.subnets); err != nil {
			return fmt.Errorf("zktest: heal %s: %w", c.endpoint, err)
		}
	}
	delete(e.isolated, i)
	return nil
}

// Isolated reports whether server i is isolated by [Ensemble.Isolate] and
// not healed since by [Ensemble.Heal], [Ensemble.Restart], [Ensemble.Rebuild]
// or [Ensemble.Kill]. It does not ask Docker: a server stopped through
// [Ensemble.Node] has lost its rules, but stays isolated here until Heal.
func (e *Ensemble) Isolated(i int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.isolated[i]
	return ok
}

// forget drops server i's isolation record: its network namespace is gone.
func (e *Ensemble) forget(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.isolated, i)
}

var errNotRunning = errors.New("container not running")

// netnsOf returns the host PID of c's main process and the identity of its
// network namespace. It checks that the PID Docker reports is the
// container's on this machine: rules must never land in another namespace,
// such as this machine's own.
func netnsOf(ctx context.Context, c *Container) (int, string, error) {
	info, err := c.Inspect(ctx)
	if err != nil {
		return 0, "", err
	}
	if info.State == nil || !info.State.Running || info.State.Pid <= 0 {
		return 0, "", errNotRunning
	}
	pid := info.State.Pid
	cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || !bytes.Contains(cgroup, []byte(info.ID)) {
		return 0, "", fmt.Errorf("%w: process %d, which Docker says runs container %.12s, is not that container's on this machine (is the Docker engine remote or in a virtual machine?)",
			errors.ErrUnsupported, pid, info.ID)
	}
	netns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return 0, "", fmt.Errorf("%w: network namespace of process %d: %w (are we root?)", errors.ErrUnsupported, pid, err)
	}
	return pid, netns, nil
}

// subnets returns the address ranges of the ensemble's network: every
// server's address on it, whatever Docker gives a restarted container, lies
// in them.
func (e *Ensemble) subnets(ctx context.Context) ([]netip.Prefix, error) {
	if e.network == nil {
		return nil, errors.New("no ensemble network")
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	res, err := cli.NetworkInspect(ctx, e.network.ID, client.NetworkInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect ensemble network: %w", err)
	}
	var subnets []netip.Prefix
	for _, cfg := range res.Network.IPAM.Config {
		if cfg.Subnet.IsValid() {
			subnets = append(subnets, cfg.Subnet.Masked())
		}
	}
	if len(subnets) == 0 {
		return nil, fmt.Errorf("ensemble network %s has no subnet", e.network.Name)
	}
	return subnets, nil
}

// filter adds (op "-I") or deletes (op "-D") the rules that drop quorum
// traffic between the namespace of process pid and subnets, with one
// iptables-restore per address family, so that each family's rules change
// all at once: a half-isolated server (cut off one way only) would be a
// different fault.
func filter(ctx context.Context, pid int, op string, subnets []netip.Prefix) error {
	var v4, v6 strings.Builder
	for _, s := range subnets {
		b := &v4
		if s.Addr().Is6() {
			b = &v6
		}
		for _, port := range quorumPorts {
			for _, dir := range [...]string{"--sport", "--dport"} {
				fmt.Fprintf(b, "%s INPUT -s %s -p tcp %s %d -j DROP\n", op, s, dir, port)
				fmt.Fprintf(b, "%s OUTPUT -d %s -p tcp %s %d -j DROP\n", op, s, dir, port)
			}
		}
	}
	for _, fam := range []struct{ cmd, rules string }{{"iptables-restore", v4.String()}, {"ip6tables-restore", v6.String()}} {
		if fam.rules == "" {
			continue
		}
		if err := restore(ctx, pid, fam.cmd, "*filter\n"+fam.rules+"COMMIT\n"); err != nil {
			return err
		}
	}
	return nil
}

// restore runs "nsenter --target pid --net -- cmd --noflush" with rules on
// its standard input.
func restore(ctx context.Context, pid int, cmd, rules string) error {
	nsenter, err := hostTool("nsenter", "util-linux")
	if err != nil {
		return err
	}
	tool, err := hostTool(cmd, "iptables")
	if err != nil {
		return err
	}
	// --wait: Docker changes rules too, under the same lock.
	run := exec.CommandContext(ctx, nsenter, "--target", strconv.Itoa(pid), "--net", "--", tool, "--wait", "--noflush")
	run.Stdin = strings.NewReader(rules)
	if out, err := run.CombinedOutput(); err != nil {
		return fmt.Errorf("nsenter %s in the network namespace of process %d: %w: %s", cmd, pid, err, bytes.TrimSpace(out))
	}
	return nil
}

// hostTool finds a command of this machine, also in the sbin directories
// that a non-root PATH leaves out.
func hostTool(name, pkg string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin/", "/sbin/"} {
		if p, err := exec.LookPath(dir + name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no %s on this machine (install %s): %w", errors.ErrUnsupported, name, pkg, err)
}
