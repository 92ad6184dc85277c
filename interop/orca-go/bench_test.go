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
	"testing"

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

func benchUnary(b *testing.B, withORCA, record bool) {
	lis := bufconn.Listen(1 << 20)
	var opts []grpc.ServerOption
	if withORCA {
		opts = append(opts, orca.CallMetricsServerOption(nil))
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, &server{record: record})
	go srv.Serve(lis)
	defer srv.Stop()

	cc, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	client := testgrpc.NewTestServiceClient(cc)
	ctx := context.Background()
	req := &testpb.SimpleRequest{}
	// One call before timing: the connection is up.
	if _, err := client.UnaryCall(ctx, req); err != nil {
		b.Fatal(err)
	}
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
