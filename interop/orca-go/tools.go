//go:build tools

// Package orcago pins grpc-go's interop client so that
//
//	GOFLAGS=-mod=mod go build -o OUT google.golang.org/grpc/interop/client
//
// run in this folder builds it from source at the version in go.mod (its
// orca_per_rpc and orca_oob cases, with the test_backend_metrics_load_balancer
// policy it registers). The benchmark (bench_test.go) is in this package too.
package orcago

import _ "google.golang.org/grpc/interop/client"
