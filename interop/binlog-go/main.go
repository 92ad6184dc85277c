// Command binlog-go is grpc-go's (v1.85.0) side of tonic-hotpath's binary
// logging interop test (gRFC A16). See README.md for the exact script and
// the entries grpc-go logs for it.
//
//	binlog-go run <log-file>
//	    runs the script (a grpc-go client against a grpc-go server in this
//	    process) with grpc-go's binary logging on; GRPC_BINARY_LOG_FILTER
//	    is the filter; the log goes to <log-file> in grpc-go's framing.
//	binlog-go decode <file> <grpc|varint>
//	    prints each entry of a log file as one line of protojson.
//	binlog-go selfcheck [-n N] [filter ...]
//	    runs the script under each filter (default: the three of the Rust
//	    test), checks and prints the entry sequence per call.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: binlog-go run <log-file>\n       binlog-go decode <file> <grpc|varint>\n       binlog-go selfcheck [-n N] [filter ...]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "run":
		if len(args) != 1 {
			usage()
		}
		err = runCmd(args[0])
	case "decode":
		if len(args) != 2 {
			usage()
		}
		err = decodeCmd(args[0], args[1], os.Stdout)
	case "selfcheck":
		err = selfcheckCmd(args, os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "binlog-go: %v\n", err)
		os.Exit(1)
	}
}
