// Command otel-go is grpc-go's side of tonic-hotpath's OpenTelemetry tracing
// interop test (tests/otel/otel_interop_go.rs). It runs grpc-go's own tracing
// (google.golang.org/grpc/stats/opentelemetry, gRFC A72) with either
// propagator and prints every span it ends as one JSON line on stdout.
//
//	otel-go server <grpc-trace-bin|w3c>
//	    serves grpc.health.v1.Health on 127.0.0.1:0, prints "LISTEN <addr>",
//	    stops when its stdin closes
//	otel-go client <addr> <grpc-trace-bin|w3c>
//	    calls grpc.health.v1.Health/Check once and exits
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental/opentelemetry"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	otelgrpc "google.golang.org/grpc/stats/opentelemetry"
)

// spanLine is one ended span, as the Rust test reads it back.
type spanLine struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id"`
	Status       string `json:"status"`
}

// jsonExporter prints each ended span as one JSON line on stdout.
type jsonExporter struct {
	mu  sync.Mutex
	out *json.Encoder
}

func (e *jsonExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		line := spanLine{
			Name:    s.Name(),
			Kind:    s.SpanKind().String(),
			TraceID: s.SpanContext().TraceID().String(),
			SpanID:  s.SpanContext().SpanID().String(),
			Status:  s.Status().Code.String(),
		}
		if s.Parent().IsValid() {
			line.ParentSpanID = s.Parent().SpanID().String()
		}
		if err := e.out.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonExporter) Shutdown(context.Context) error { return nil }

// options enables grpc-go's tracing with the named propagator; every span
// is sampled and printed as soon as it ends.
func options(prop string) otelgrpc.Options {
	var p propagation.TextMapPropagator
	switch prop {
	case "grpc-trace-bin":
		p = otelgrpc.GRPCTraceBinPropagator{}
	case "w3c":
		p = propagation.TraceContext{}
	default:
		fail("unknown propagator %q", prop)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(&jsonExporter{out: json.NewEncoder(os.Stdout)}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return otelgrpc.Options{TraceOptions: opentelemetry.TraceOptions{
		TracerProvider:    provider,
		TextMapPropagator: p,
	}}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "otel-go: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "server":
		serve(os.Args[2])
	case len(os.Args) == 4 && os.Args[1] == "client":
		call(os.Args[2], os.Args[3])
	default:
		fail("usage: otel-go server <propagator> | otel-go client <addr> <propagator>")
	}
}

func serve(prop string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	srv := grpc.NewServer(otelgrpc.ServerOption(options(prop)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	fmt.Printf("LISTEN %s\n", lis.Addr())
	go func() {
		// The test closes stdin when it is done calling.
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.GracefulStop()
	}()
	if err := srv.Serve(lis); err != nil {
		fail("serve: %v", err)
	}
}

func call(addr, prop string) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		otelgrpc.DialOption(options(prop)))
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fail("Check: %v", err)
	}
	fmt.Fprintf(os.Stderr, "otel-go: Check: %v\n", resp.GetStatus())
}
