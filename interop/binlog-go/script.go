package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/binarylog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// How long the script waits for any one step before failing.
const stepTimeout = 10 * time.Second

// The script's deadline (calls 4 and 8).
const sleepDeadline = 100 * time.Millisecond

// compressedText is call 7's message: "compressed" 50 times, no separator.
var compressedText = strings.Repeat("compressed", 50)

// callMetadata is the request metadata of every call; the binary value is
// given raw (grpc-go sends it base64 on the wire).
func callMetadata() metadata.MD {
	return metadata.Pairs("x-user", "alice", "x-blob-bin", "\x00\x01\x02")
}

// endWatcher is a server stats handler reporting, on ends, the method of
// every RPC whose processing finished; grpc-go calls it after it has logged
// the server's SERVER_TRAILER.
type endWatcher struct{ ends chan string }

type methodKey struct{}

func (w *endWatcher) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (w *endWatcher) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); ok {
		m, _ := ctx.Value(methodKey{}).(string)
		w.ends <- m
	}
}

func (w *endWatcher) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (w *endWatcher) HandleConn(context.Context, stats.ConnStats) {}

func (w *endWatcher) wait(method string) error {
	select {
	case m := <-w.ends:
		if m != method {
			return fmt.Errorf("server finished %s, want %s", m, method)
		}
		return nil
	case <-time.After(stepTimeout):
		return fmt.Errorf("timed out waiting for the server to finish %s", method)
	}
}

// wantCode checks a call's error against the code it should end with.
func wantCode(err error, code codes.Code) error {
	if got := status.Code(err); got != code {
		return fmt.Errorf("got %v (%v), want code %v", got, err, code)
	}
	return nil
}

// runCmd is `binlog-go run <log-file>`.
func runCmd(logFile string) error {
	sink, err := newFileSink(logFile)
	if err != nil {
		return err
	}
	binarylog.SetSink(sink)
	scriptErr := runScript(sink)
	if err := sink.Close(); err != nil && scriptErr == nil {
		scriptErr = fmt.Errorf("writing %s: %v", logFile, err)
	}
	return scriptErr
}

func runScript(sink *fileSink) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	watcher := &endWatcher{ends: make(chan string, 16)}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.StatsHandler(watcher))
	srv.RegisterService(&echoService, &echoServer{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-served
	}()

	addr := lis.Addr().String()
	line, _ := json.Marshal(map[string]string{"server_address": addr})
	fmt.Println(string(line))

	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return err
	}
	defer cc.Close()

	calls := []struct {
		name   string
		method string // the server's stats End to wait for; "" for none
		run    func(context.Context, *grpc.ClientConn) error
	}{
		{"1 unary ok", methodUnary, callUnaryOK},
		{"2 unary error", methodUnary, callUnaryError},
		{"3 server streaming cancelled", methodServer, callServerStreamingCancel},
		{"4 deadline", methodUnary, callDeadline},
		{"5 bidi half-close", methodBidi, callBidi},
		{"6 unknown method", "", callUnknown},
		{"7 compressed", methodUnary, callCompressed},
		{"8 server streaming deadline", methodServer, callServerStreamingDeadline},
	}
	for _, c := range calls {
		before := sink.clientCallCount()
		ctx := metadata.NewOutgoingContext(context.Background(), callMetadata())
		if err := c.run(ctx, cc); err != nil {
			return fmt.Errorf("call %s: %v", c.name, err)
		}
		if c.method != "" {
			if err := watcher.wait(c.method); err != nil {
				return fmt.Errorf("call %s: %v", c.name, err)
			}
		}
		if err := sink.waitClientFinal(before, stepTimeout); err != nil {
			return fmt.Errorf("call %s: %v", c.name, err)
		}
		fmt.Fprintf(os.Stderr, "binlog-go: call %s done\n", c.name)
	}
	return nil
}

// Call 1: UnaryEcho "hello", OK, response header x-served-by: echo.
func callUnaryOK(ctx context.Context, cc *grpc.ClientConn) error {
	var out echoMsg
	var hdr metadata.MD
	if err := cc.Invoke(ctx, methodUnary, &echoMsg{Message: "hello"}, &out, grpc.Header(&hdr)); err != nil {
		return err
	}
	if out.Message != "hello" {
		return fmt.Errorf("got %q, want hello", out.Message)
	}
	if got := hdr.Get(servedByKey); len(got) != 1 || got[0] != servedByValue {
		return fmt.Errorf("response header %s = %q", servedByKey, got)
	}
	return nil
}

// Call 2: UnaryEcho "fail": INVALID_ARGUMENT "bad request" with details.
func callUnaryError(ctx context.Context, cc *grpc.ClientConn) error {
	var out echoMsg
	err := cc.Invoke(ctx, methodUnary, &echoMsg{Message: "fail"}, &out)
	if err := wantCode(err, codes.InvalidArgument); err != nil {
		return err
	}
	st, _ := status.FromError(err)
	if st.Message() != failMessage || len(st.Proto().GetDetails()) != 1 {
		return fmt.Errorf("unexpected status %v", st.Proto())
	}
	return nil
}

// Call 3: ServerStreamingEcho "stream": read one message, then cancel.
func callServerStreamingCancel(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodServer)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&echoMsg{Message: "stream"}); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	var out echoMsg
	if err := cs.RecvMsg(&out); err != nil {
		return err
	}
	if out.Message != "stream 0" {
		return fmt.Errorf("got %q, want \"stream 0\"", out.Message)
	}
	cancel()
	return nil
}

// Call 4: UnaryEcho "sleep" with a 100 ms deadline: DEADLINE_EXCEEDED.
func callDeadline(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, sleepDeadline)
	defer cancel()
	var out echoMsg
	return wantCode(cc.Invoke(ctx, methodUnary, &echoMsg{Message: "sleep"}, &out), codes.DeadlineExceeded)
}

// Call 5: BidirectionalStreamingEcho: send "a", "b", half-close, read to EOF.
func callBidi(ctx context.Context, cc *grpc.ClientConn) error {
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodBidi)
	if err != nil {
		return err
	}
	for _, m := range []string{"a", "b"} {
		if err := cs.SendMsg(&echoMsg{Message: m}); err != nil {
			return err
		}
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	var got []string
	for {
		var out echoMsg
		err := cs.RecvMsg(&out)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		got = append(got, out.Message)
	}
	if strings.Join(got, ",") != "a,b" {
		return fmt.Errorf("got %q, want [a b]", got)
	}
	return nil
}

// Call 6: the unknown method /hotpath.echo.Echo/Nope: UNIMPLEMENTED.
func callUnknown(ctx context.Context, cc *grpc.ClientConn) error {
	var out echoMsg
	return wantCode(cc.Invoke(ctx, methodNope, &echoMsg{Message: "x"}, &out), codes.Unimplemented)
}

// Call 7: UnaryEcho of compressedText, gzip both ways.
func callCompressed(ctx context.Context, cc *grpc.ClientConn) error {
	var out echoMsg
	if err := cc.Invoke(ctx, methodUnary, &echoMsg{Message: compressedText}, &out, grpc.UseCompressor(gzip.Name)); err != nil {
		return err
	}
	if out.Message != compressedText {
		return fmt.Errorf("got %d bytes back, want the %d sent", len(out.Message), len(compressedText))
	}
	return nil
}

// Call 8: ServerStreamingEcho "watch" with a 100 ms deadline: read
// "watch 0", "watch 1", ... until the deadline ends the call
// (DEADLINE_EXCEEDED).
func callServerStreamingDeadline(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, sleepDeadline)
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodServer)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&echoMsg{Message: "watch"}); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		var out echoMsg
		if err := cs.RecvMsg(&out); err != nil {
			if i == 0 {
				return fmt.Errorf("no message before the deadline: %v", err)
			}
			return wantCode(err, codes.DeadlineExceeded)
		}
		if want := fmt.Sprintf("watch %d", i); out.Message != want {
			return fmt.Errorf("got %q, want %q", out.Message, want)
		}
	}
}
