// Command retry-go is grpc-go's client (v1.85.0, its own gRFC A6 retries)
// for tonic-hotpath's retry interop tests (tests/retry/go_peer.rs): it
// makes the same calls as the ported grpc-go retry tests make against the
// same scripted tonic server as the crate's RetryLayer, so that the test
// can compare the attempts the server saw from each client.
//
// Usage: retry-go -addr HOST:PORT -config JSON [-buffer BYTES]
//
// The channel takes -config as its default service config and, with
// -buffer, grpc.MaxRetryRPCBufferSize. It then reads one case per line on
// stdin, runs it, and answers one line on stdout: "ok", or "error: ..."
// saying which step failed. A case is a JSON object:
//
//	{"unary": N}     N unary calls (UnaryEcho), one after the other; the
//	                 answer is "codes: C1 C2 ..." (grpc-go's code names).
//	{"stream": ops}  one bidi call (BidirectionalStreamingEcho) driven by
//	                 ops, grpc-go's TestRetryStreaming client steps:
//	                 {"req": "m"}, {"res": "m"}, {"err": "Unavailable"}
//	                 ("OK": the stream ends cleanly), {"close": true},
//	                 {"time": true}, {"elapsed_ms": 1000}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// echoMsg is hotpath.echo's EchoRequest / EchoResponse: `string message = 1`.
type echoMsg struct{ Message string }

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*echoMsg)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	if m.Message == "" {
		return []byte{}, nil
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, m.Message), nil
}

func (rawCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(*echoMsg)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	m.Message = ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			s, n := protowire.ConsumeString(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Message, b = s, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

func (rawCodec) Name() string { return "proto" }

type step struct {
	Req       *string `json:"req"`
	Res       *string `json:"res"`
	Err       *string `json:"err"`
	Close     bool    `json:"close"`
	Time      bool    `json:"time"`
	ElapsedMs int64   `json:"elapsed_ms"`
}

type testCase struct {
	Unary  int    `json:"unary"`
	Stream []step `json:"stream"`
}

var bidi = &grpc.StreamDesc{StreamName: "BidirectionalStreamingEcho", ServerStreams: true, ClientStreams: true}

// codeName is a code as the Rust side names it (tonic's Debug): "OK" and
// grpc-go's CamelCase names otherwise.
func codeName(err error) string {
	if err == nil || err == io.EOF {
		return "OK"
	}
	return status.Code(err).String()
}

func runStream(conn *grpc.ClientConn, steps []step) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, bidi, "/hotpath.echo.Echo/BidirectionalStreamingEcho")
	if err != nil {
		return fmt.Errorf("NewStream: %v", err)
	}
	var start time.Time
	for i, s := range steps {
		switch {
		case s.Req != nil:
			if err := stream.SendMsg(&echoMsg{Message: *s.Req}); err != nil {
				return fmt.Errorf("step %d: Send = %v", i, err)
			}
		case s.Res != nil:
			got := new(echoMsg)
			if err := stream.RecvMsg(got); err != nil || got.Message != *s.Res {
				return fmt.Errorf("step %d: Recv = %q, %v; want %q", i, got.Message, err, *s.Res)
			}
		case s.Err != nil:
			got := new(echoMsg)
			err := stream.RecvMsg(got)
			if err == nil || codeName(err) != *s.Err {
				return fmt.Errorf("step %d: Recv = %q, %v; want %s", i, got.Message, err, *s.Err)
			}
		case s.Close:
			if err := stream.CloseSend(); err != nil {
				return fmt.Errorf("step %d: CloseSend = %v", i, err)
			}
		case s.Time:
			start = time.Now()
		case s.ElapsedMs > 0:
			if elapsed := time.Since(start); elapsed < time.Duration(s.ElapsedMs)*time.Millisecond {
				return fmt.Errorf("step %d: elapsed %v, want at least %d ms", i, elapsed, s.ElapsedMs)
			}
		}
	}
	return nil
}

func runUnary(conn *grpc.ClientConn, calls int) string {
	names := make([]string, 0, calls)
	for i := 0; i < calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := conn.Invoke(ctx, "/hotpath.echo.Echo/UnaryEcho", &echoMsg{}, new(echoMsg))
		cancel()
		names = append(names, codeName(err))
	}
	return "codes: " + strings.Join(names, " ")
}

func main() {
	addr := flag.String("addr", "", "the scripted server's address")
	config := flag.String("config", "", "the channel's default service config (JSON)")
	buffer := flag.Int("buffer", 0, "grpc.MaxRetryRPCBufferSize, when above 0")
	flag.Parse()
	if *addr == "" || *config == "" {
		fmt.Fprintln(os.Stderr, "usage: retry-go -addr HOST:PORT -config JSON [-buffer BYTES]")
		os.Exit(2)
	}
	callOptions := []grpc.CallOption{grpc.ForceCodec(rawCodec{})}
	if *buffer > 0 {
		callOptions = append(callOptions, grpc.MaxRetryRPCBufferSize(*buffer))
	}
	conn, err := grpc.NewClient("passthrough:///"+*addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(*config),
		grpc.WithDefaultCallOptions(callOptions...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		var c testCase
		if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
			fmt.Println("error: case:", err)
			continue
		}
		switch {
		case c.Unary > 0:
			fmt.Println(runUnary(conn, c.Unary))
		default:
			if err := runStream(conn, c.Stream); err != nil {
				fmt.Println("error:", strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Println("ok")
			}
		}
	}
}
