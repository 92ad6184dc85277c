package orcago

// grpc-go's per-call ORCA cost, for comparison with the tonic layer's: a
// unary call through a real in-process grpc-go server (over bufconn, so no
// kernel socket in the figures) with and without
// orca.CallMetricsServerOption(nil), the handler either recording a request
// cost and two named metrics (so the interceptor encodes a report into the
// trailer) or recording nothing.
//
//	go test -bench . -benchmem -run '^$'
//
// The ORCA cost of a call is the difference between the orca and plain
// rows of the same handler.

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/test/bufconn"
)

type server struct {
	testgrpc.UnimplementedTestServiceServer
	record bool
}

func (s *server) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s.record {
		// As an application does: nil without the server option.
		if r := orca.CallMetricsRecorderFromContext(ctx); r != nil {
			r.SetRequestCost("cost", 1)
			r.SetNamedMetric("a", 1)
			r.SetNamedMetric("b", 2)
		}
	}
	return &testpb.SimpleResponse{}, nil
}

// start serves the test service over bufconn (with the ORCA server option
// when withORCA) and returns a client connected to it (one call made: the
// connection is up) and what stops both.
func start(b *testing.B, withORCA, record bool) (testgrpc.TestServiceClient, func()) {
	lis := bufconn.Listen(1 << 20)
	var opts []grpc.ServerOption
	if withORCA {
		opts = append(opts, orca.CallMetricsServerOption(nil))
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, &server{record: record})
	go srv.Serve(lis)

	cc, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		b.Fatal(err)
	}
	client := testgrpc.NewTestServiceClient(cc)
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		b.Fatal(err)
	}
	return client, func() {
		cc.Close()
		srv.Stop()
	}
}

func benchUnary(b *testing.B, withORCA, record bool) {
	client, stop := start(b, withORCA, record)
	defer stop()
	ctx := context.Background()
	req := &testpb.SimpleRequest{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := client.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnary(b *testing.B) {
	for _, c := range []struct {
		name             string
		withORCA, record bool
	}{
		{"plain/nothing", false, false},
		{"orca/nothing", true, false},
		{"plain/record", false, true},
		{"orca/record", true, true},
	} {
		b.Run(c.name, func(b *testing.B) { benchUnary(b, c.withORCA, c.record) })
	}
}

// BenchmarkInterleaved times a plain and an orca call alternately (the
// order swapped every iteration), each server with the same handler, so
// that a busy machine's drift falls on both alike; it reports the median
// time of each and their difference (the ORCA cost per call). One op is
// one pair of calls; its allocs/op are the pair's.
func BenchmarkInterleaved(b *testing.B) {
	for _, c := range []struct {
		name   string
		record bool
	}{{"nothing", false}, {"record", true}} {
		b.Run(c.name, func(b *testing.B) {
			plain, stopPlain := start(b, false, c.record)
			defer stopPlain()
			withORCA, stopORCA := start(b, true, c.record)
			defer stopORCA()
			ctx := context.Background()
			req := &testpb.SimpleRequest{}
			timed := func(client testgrpc.TestServiceClient) time.Duration {
				started := time.Now()
				if _, err := client.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
				return time.Since(started)
			}
			var plainTimes, orcaTimes []time.Duration
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if i%2 == 0 {
					plainTimes = append(plainTimes, timed(plain))
					orcaTimes = append(orcaTimes, timed(withORCA))
				} else {
					orcaTimes = append(orcaTimes, timed(withORCA))
					plainTimes = append(plainTimes, timed(plain))
				}
				i++
			}
			b.StopTimer()
			p, o := median(plainTimes), median(orcaTimes)
			b.ReportMetric(float64(p.Nanoseconds()), "plain-median-ns")
			b.ReportMetric(float64(o.Nanoseconds()), "orca-median-ns")
			b.ReportMetric(float64((o - p).Nanoseconds()), "orca-cost-ns")
		})
	}
}

func median(times []time.Duration) time.Duration {
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}
