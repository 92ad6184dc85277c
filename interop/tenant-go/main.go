// Command tenant-go is a grpc-go client for tonic-hotpath's tenant limit
// interop tests (tests/tenant/tenant_limits_interop_go.rs and
// tenant_limits_pushback_go.rs): it calls grpc.health.v1.Health/Check on
// -addr with the org id -org in x-scope-orgid metadata, -calls times one
// after the other, and prints one JSON line per call with the status code
// grpc-go reports, its message and how long the call took (all its
// attempts), as a Go service calling a Rust one would see them.
//
// With -retry, the channel's service config has a retry policy for
// RESOURCE_EXHAUSTED (-attempts attempts, 3 by default, at most grpc-go's
// 5) whose backoff is 10 s: a retry that comes sooner was timed by the
// server's grpc-retry-pushback-ms trailer, which grpc-go obeys instead of
// its backoff (gRFC A6).
//
// -addr may list several addresses, comma-separated
// (tests/limits_redis/pushback_go.rs: three replicas of a fleet): the
// channel then balances over them with grpc-go's round_robin, every
// attempt (a retry too) going to the next ready one. With -settle, the
// client first waits for the channel to be ready and then that long more,
// so that every replica's connection is up before the first call
// (round_robin skips replicas still connecting).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// serviceConfig is the channel's service config: round_robin, and with
// attempts > 0 a retry policy for RESOURCE_EXHAUSTED (a tenant over its
// quota) and UNAVAILABLE (a server overloaded, or gone).
func serviceConfig(attempts int) string {
	config := `{"loadBalancingConfig": [{"round_robin": {}}]`
	if attempts > 0 {
		config += fmt.Sprintf(`,
  "methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {
      "maxAttempts": %d,
      "initialBackoff": "10s",
      "maxBackoff": "10s",
      "backoffMultiplier": 1,
      "retryableStatusCodes": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"]
    }
  }]`, attempts)
	}
	return config + "}"
}

type result struct {
	Call    int     `json:"call"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Millis  float64 `json:"ms"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "server address, or several comma-separated (round_robin over them)")
	org := flag.String("org", "", "x-scope-orgid value (none when empty)")
	calls := flag.Int("calls", 1, "calls to make, one after the other")
	retry := flag.Bool("retry", false, "retry RESOURCE_EXHAUSTED and UNAVAILABLE (service config retry policy)")
	attempts := flag.Int("attempts", 3, "with -retry, the policy's maxAttempts (grpc-go allows at most 5)")
	settle := flag.Duration("settle", 0, "wait for the channel to be ready, then this long, before the first call")
	flag.Parse()

	options := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *retry {
		options = append(options, grpc.WithDefaultServiceConfig(serviceConfig(*attempts)))
	} else {
		options = append(options, grpc.WithDefaultServiceConfig(serviceConfig(0)), grpc.WithDisableRetry())
	}
	target := "passthrough:///" + *addr
	if addrs := strings.Split(*addr, ","); len(addrs) > 1 {
		fleet := manual.NewBuilderWithScheme("fleet")
		state := resolver.State{}
		for _, a := range addrs {
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
		}
		fleet.InitialState(state)
		options = append(options, grpc.WithResolvers(fleet))
		target = "fleet:///replicas"
	}
	conn, err := grpc.NewClient(target, options...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	if *settle > 0 {
		ready, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn.Connect()
		for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
			if !conn.WaitForStateChange(ready, state) {
				fmt.Fprintln(os.Stderr, "the channel was not ready in 30 s")
				os.Exit(1)
			}
		}
		cancel()
		time.Sleep(*settle)
	}
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
