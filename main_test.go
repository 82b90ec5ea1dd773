package zklock_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// serversEnv names the ZooKeeper the tests run against: a comma-separated
// list of host:port. `make test` starts a throwaway server and sets it.
const serversEnv = "ZKLOCK_TEST_SERVERS"

// testServers parses serversEnv once per test binary.
var testServers = sync.OnceValues(func() ([]string, error) {
	env := os.Getenv(serversEnv)
	if strings.TrimSpace(env) == "" {
		return nil, fmt.Errorf("%s is not set: run `make test`, which starts a ZooKeeper and sets it, "+
			"or set %s=host:port[,host:port...] to a ZooKeeper of your own", serversEnv, serversEnv)
	}
	var servers []string
	for _, s := range strings.Split(env, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("%s=%q: an empty server in the list", serversEnv, env)
		}
		servers = append(servers, s)
	}
	return servers, nil
})

// servers returns the ZooKeeper servers of ZKLOCK_TEST_SERVERS. A test that
// needs a server fails without one, and never skips: a run without a server
// must not look like a run that passed.
func servers(t testing.TB) []string {
	t.Helper()
	s, err := testServers()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
