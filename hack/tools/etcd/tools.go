//go:build tools

// Package tools pins the etcd server built for the local test cluster.
package tools

import _ "go.etcd.io/etcd/server/v3"
