package zklock

import (
	"net"
	"strconv"
	"strings"
)

// connectString is what [Connect]'s servers say: the servers' names, with
// their ports, and the chroot.
type connectString struct {
	servers []string // "host:port", as named: resolved at every connection attempt
	chroot  string   // "" for none
}

// parseConnectString reads servers as ZooKeeper's Java client reads a
// connect string (ConnectStringParser), whole or split across elements:
// hosts separated by commas, a host without a port on 2181, and a chroot
// from the first "/", after the last host. Unlike Java's, which takes
// everything from the first "/" of the whole string as the chroot (so
// "zk1/a,zk2" is one host with the chroot "/a,zk2"), a chroot anywhere but
// after the last host is refused: it is a mistake, not a path. Every error
// wraps ErrInvalidArgument.
func parseConnectString(servers []string) (connectString, error) {
	var cs connectString
	hosts, err := splitHosts(servers)
	if err != nil {
		return cs, err
	}
	for i, h := range hosts {
		if slash := strings.IndexByte(h, '/'); slash >= 0 {
			if i != len(hosts)-1 {
				return cs, invalidf("chroot %q follows %q, not the last server, in %q", h[slash:], h[:slash], servers)
			}
			if err := validateChroot(h[slash:]); err != nil {
				return cs, err
			}
			if h[slash:] != "/" {
				cs.chroot = h[slash:]
			}
			h = h[:slash]
		}
		server, err := withPort(h)
		if err != nil {
			return cs, invalidf("server %q in %q: %v", h, servers, err)
		}
		cs.servers = append(cs.servers, server)
	}
	return cs, nil
}

// splitHosts splits the elements of servers at commas, as Java's
// StringUtils.split does: each host trimmed, empty ones ("zk1:2181,") left
// out. An element that is empty is an error: a list that lost a server.
func splitHosts(servers []string) ([]string, error) {
	if len(servers) == 0 {
		return nil, invalidf("no servers")
	}
	var hosts []string
	for _, el := range servers {
		if strings.TrimSpace(el) == "" {
			return nil, invalidf("empty server address in %q", servers)
		}
		for _, h := range strings.Split(el, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts, nil
}

// defaultPort is ZooKeeper's client port, for a server given without one.
const defaultPort = "2181"

// withPort returns host:port, ZooKeeper's port added where none is given
// ("zk1" is "zk1:2181", "::1" and "[::1]" are "[::1]:2181"), so that
// errors name the address dialled.
func withPort(s string) (string, error) {
	if s == "" {
		return "", errText("no host")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		switch {
		case !strings.Contains(s, ":"): // a name or an IPv4 address
			host, port = s, defaultPort
		case strings.Contains(bare, ":") && net.ParseIP(bare) != nil: // IPv6
			host, port = bare, defaultPort
		default:
			return "", err
		}
	}
	switch {
	case host == "":
		return "", errText("no host")
	case strings.ContainsAny(host, "[]"):
		return "", errText("misplaced brackets")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", errText("port " + strconv.Quote(port) + " is not a number from 1 to 65535")
	}
	return net.JoinHostPort(host, port), nil
}

// validateChroot checks a chroot as ZooKeeper's PathUtils.validatePath
// does (the Java client refuses a connect string whose chroot fails it):
// absolute, no trailing slash (except "/" itself), no empty, "." or ".."
// element, no character ZooKeeper refuses; and, as for lock paths, not
// under /zookeeper, the server's own.
func validateChroot(p string) error {
	if p == "/" {
		return nil
	}
	return checkPath("chroot", p)
}

// errText is a plain error text, for invalidf's %v.
type errText string

func (e errText) Error() string { return string(e) }
