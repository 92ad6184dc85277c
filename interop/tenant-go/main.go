// Command tenant-go is a grpc-go client for tonic-hotpath's tenant limit
// interop tests (tests/tenant/tenant_limits_interop_go.rs and
// tenant_limits_pushback_go.rs): it calls grpc.health.v1.Health/Check on
// -addr with the org id -org in x-scope-orgid metadata, -calls times one
// after the other, and prints one JSON line per call with the status code
// grpc-go reports, its message and how long the call took (all its
// attempts), as a Go service calling a Rust one would see them.
//
// With -retry, the channel's service config has a retry policy for
// RESOURCE_EXHAUSTED (3 attempts) whose backoff is 10 s: a retry that
// comes sooner was timed by the server's grpc-retry-pushback-ms trailer,
// which grpc-go obeys instead of its backoff (gRFC A6).
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

const retryPolicy = `{
  "methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "10s",
      "maxBackoff": "10s",
      "backoffMultiplier": 1,
      "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
    }
  }]
}`

type result struct {
	Call    int     `json:"call"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Millis  float64 `json:"ms"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "server address")
	org := flag.String("org", "", "x-scope-orgid value (none when empty)")
	calls := flag.Int("calls", 1, "calls to make, one after the other")
	retry := flag.Bool("retry", false, "retry RESOURCE_EXHAUSTED (service config retry policy)")
	flag.Parse()

	options := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *retry {
		options = append(options, grpc.WithDefaultServiceConfig(retryPolicy))
	} else {
		options = append(options, grpc.WithDisableRetry())
	}
	conn, err := grpc.NewClient("passthrough:///"+*addr, options...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	out := json.NewEncoder(os.Stdout)
	for i := 0; i < *calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if *org != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", *org)
		}
		start := time.Now()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		took := time.Since(start)
		cancel()
		st := status.Convert(err)
		line := result{
			Call:    i,
			Code:    st.Code().String(),
			Message: st.Message(),
			Millis:  float64(took.Microseconds()) / 1000,
		}
		if err := out.Encode(line); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(1)
		}
	}
}
