package zklock

import "github.com/zkrecipes/zklock/internal/zkfake"

// WithFakeForTest runs the Client on the in-memory ZooKeeper f instead of
// dialing its servers: the real Session and engine, with no network.
func WithFakeForTest(f *zkfake.Server) Option {
	return func(o *clientOptions) error {
		o.connect = f.Connect
		return nil
	}
}

// DeepQueue is deepQueue: the queue from which a lock whose tokens are
// asked for still hands off where grants come without their zxid.
const DeepQueue = deepQueue
