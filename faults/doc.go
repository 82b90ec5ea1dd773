// Package faults breaks a ZooKeeper client's transport on demand, with no
// Docker and no dependency beyond go-zookeeper: plug [Faults.Dialer] into a
// client (zklock.WithDialer or zk.WithDialer) and drop, partition, delay or
// cut its connections, or expire its session, against any real server.
//
// The container-backed test kit, github.com/zkrecipes/zklock/zktest, builds
// on it for faults of the servers themselves (pause, stop, leader loss).
package faults
