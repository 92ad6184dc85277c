//go:build tools

// Package tools pins grpcurl so that
//
//	GOFLAGS=-mod=mod go build -o OUT github.com/fullstorydev/grpcurl/cmd/grpcurl
//
// run in this folder builds it from source at the version in go.mod.
package tools

import _ "github.com/fullstorydev/grpcurl/cmd/grpcurl"
