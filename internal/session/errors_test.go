package session

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Done},
		{fmt.Errorf("x: %w", zk.ErrNoNode), Gone},
		{ErrClientClosed, Closing},
		{zk.ErrClosing, Closing},
		{zk.ErrSessionExpired, Retry},
		{zk.ErrConnectionClosed, Retry},
		{zk.ErrNoAuth, Permanent},
		{context.Canceled, Permanent},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
