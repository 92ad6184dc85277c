// Command tenant-go is a grpc-go client for tonic-hotpath's tenant interop
// test: it calls grpc.health.v1.Health/Check on -addr with the org id
// -org in x-scope-orgid metadata, -calls times one after the other, and
// prints one JSON line per call with the status code grpc-go reports and
// its message, as a Go service calling a Rust one would see them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type result struct {
	Call    int    `json:"call"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "server address")
	org := flag.String("org", "", "x-scope-orgid value (none when empty)")
	calls := flag.Int("calls", 1, "calls to make, one after the other")
	flag.Parse()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	out := json.NewEncoder(os.Stdout)
	for i := 0; i < *calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if *org != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", *org)
		}
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		st := status.Convert(err)
		if err := out.Encode(result{Call: i, Code: st.Code().String(), Message: st.Message()}); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(1)
		}
	}
}
