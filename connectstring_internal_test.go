package zklock

import (
	"errors"
	"slices"
	"testing"
)

// The connect string as ZooKeeper's Java client reads it (ConnectStringParser),
// whole or split across elements.
func TestParseConnectString(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		servers []string
		chroot  string
	}{
		{[]string{"zk1:2181,zk2:2182,zk3:2183/apps/billing"}, []string{"zk1:2181", "zk2:2182", "zk3:2183"}, "/apps/billing"},
		{[]string{"zk1:2181", "zk2:2182", "zk3:2183/apps/billing"}, []string{"zk1:2181", "zk2:2182", "zk3:2183"}, "/apps/billing"},
		{[]string{"zk1:2181,zk2:2182", "zk3:2183/apps/billing"}, []string{"zk1:2181", "zk2:2182", "zk3:2183"}, "/apps/billing"},
		{[]string{"zk1", "zk2/a"}, []string{"zk1:2181", "zk2:2181"}, "/a"},
		{[]string{"127.0.0.1:21810/"}, []string{"127.0.0.1:21810"}, ""},
		{[]string{" zk1:1 , zk2:2 ,"}, []string{"zk1:1", "zk2:2"}, ""},
		{[]string{"[::1]:2181,::1,[::1]/x"}, []string{"[::1]:2181", "[::1]:2181", "[::1]:2181"}, "/x"},
	} {
		got, err := parseConnectString(tc.in)
		if err != nil || !slices.Equal(got.servers, tc.servers) || got.chroot != tc.chroot {
			t.Errorf("%q: servers %q chroot %q err %v; want %q %q", tc.in, got.servers, got.chroot, err, tc.servers, tc.chroot)
		}
	}
}

// What ZooKeeper would refuse, or what cannot be a connect string, fails
// with ErrInvalidArgument, naming the fault.
func TestParseConnectStringRefuses(t *testing.T) {
	for _, in := range [][]string{
		nil, {}, {""}, {"  "}, {"zk1:2181", ""},
		{"zk1:2181//a"}, {"zk1:2181/a/"}, {"zk1:2181/a//b"}, {"zk1:2181/a/./b"}, {"zk1:2181/a/.."},
		{"zk1:2181/a\x01"}, {"zk1:2181/zookeeper"}, {"zk1:2181/zookeeper/quota"},
		// A chroot before another host: Java reads "/a,zk2:2181" as the
		// chroot, with one host; a mistake, refused here.
		{"zk1:2181/a,zk2:2181"}, {"zk1:2181/a", "zk2:2181"},
		{"zk1:"}, {"zk1:x"}, {"zk1:0"}, {"zk1:65536"}, {":2181"}, {"zk1:2181:3"}, {"[zk1]x:1"},
	} {
		if got, err := parseConnectString(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %+v, %v; want ErrInvalidArgument", in, got, err)
		}
	}
}
