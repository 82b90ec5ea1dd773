module github.com/zkrecipes/zklock

go 1.21

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/go-zookeeper/zk v1.0.4
)
