package session

import "testing"

// Paths come back relative to the chroot; a path outside it (a sibling
// that shares the chroot's prefix) comes back as it is.
func TestRootedPaths(t *testing.T) {
	r := rooted{root: "/apps/billing"}
	for _, tc := range []struct{ server, rel string }{
		{"/apps/billing", "/"},
		{"/apps/billing/locks/a", "/locks/a"},
		{"/apps/billingX/locks", "/apps/billingX/locks"},
		{"/apps", "/apps"},
		{"/elsewhere/00ff", "/elsewhere/00ff"},
	} {
		if got := r.rel(tc.server); got != tc.rel {
			t.Errorf("rel(%q) = %q, want %q", tc.server, got, tc.rel)
		}
	}
	for _, tc := range []struct{ rel, server string }{
		{"/", "/apps/billing"},
		{"/locks/a", "/apps/billing/locks/a"},
	} {
		if got := r.abs(tc.rel); got != tc.server {
			t.Errorf("abs(%q) = %q, want %q", tc.rel, got, tc.server)
		}
	}
	if ev := r.relEvent(Event{Path: "/apps/billing/a/n"}); ev.Path != "/a/n" {
		t.Errorf("event path %q, want /a/n", ev.Path)
	}
	if err := r.relErr(&goneNode{path: "/apps/billing/a"}); !GoneAt(err, "/a") {
		t.Errorf("relErr: %v, want it gone at /a", err)
	}
	if !topLevel("/locks") || topLevel("/locks/a") {
		t.Error("topLevel: /locks is, /locks/a is not")
	}
}
