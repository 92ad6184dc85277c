package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// The hotpath.echo.Echo service (tests/support/echo.proto), without protoc:
// echoMsg is both EchoRequest and EchoResponse (`string message = 1`), and
// rawCodec encodes it by hand.
const (
	serviceName  = "hotpath.echo.Echo"
	methodUnary  = "/hotpath.echo.Echo/UnaryEcho"
	methodServer = "/hotpath.echo.Echo/ServerStreamingEcho"
	methodClient = "/hotpath.echo.Echo/ClientStreamingEcho"
	methodBidi   = "/hotpath.echo.Echo/BidirectionalStreamingEcho"
	methodNope   = "/hotpath.echo.Echo/Nope"
)

// echoMsg is EchoRequest / EchoResponse: `string message = 1`.
type echoMsg struct {
	Message string
}

// marshal encodes m as proto3 does: the field is left out when empty.
func (m *echoMsg) marshal() []byte {
	if m.Message == "" {
		return []byte{}
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, m.Message)
}

// unmarshal decodes field 1 (the last one wins) and skips unknown fields.
func (m *echoMsg) unmarshal(b []byte) error {
	m.Message = ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Message = v
			b = b[n:]
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

// rawCodec marshals *echoMsg by hand. Named "proto" so the content-type is
// application/grpc+proto, as for generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*echoMsg)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return m.marshal(), nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*echoMsg)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	return m.unmarshal(data)
}

func (rawCodec) Name() string { return "proto" }

// The fixed values of the script (see README.md).
const (
	servedByKey   = "x-served-by"
	servedByValue = "echo"
	failMessage   = "bad request"
	detailTypeURL = "type.googleapis.com/hotpath.echo.EchoResponse"
	detailText    = "detail"
	streamTick    = 20 * time.Millisecond
)

// failStatus is call 2's status: INVALID_ARGUMENT "bad request" with one
// detail, an Any holding EchoResponse{message: "detail"}.
func failStatus() *status.Status {
	return status.FromProto(&spb.Status{
		Code:    int32(codes.InvalidArgument),
		Message: failMessage,
		Details: []*anypb.Any{{
			TypeUrl: detailTypeURL,
			Value:   (&echoMsg{Message: detailText}).marshal(),
		}},
	})
}

// echoServer is the server side of the script.
type echoServer struct{}

// echoService is the hand-written ServiceDesc; HandlerType accepts anything.
var echoService = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "UnaryEcho",
		Handler:    unaryEchoHandler,
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "ServerStreamingEcho", Handler: serverStreamingEchoHandler, ServerStreams: true},
		{StreamName: "ClientStreamingEcho", Handler: clientStreamingEchoHandler, ClientStreams: true},
		{StreamName: "BidirectionalStreamingEcho", Handler: bidiEchoHandler, ServerStreams: true, ClientStreams: true},
	},
}

func unaryEchoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(echoMsg)
	if err := dec(in); err != nil {
		return nil, err
	}
	handler := func(ctx context.Context, req any) (any, error) {
		return srv.(*echoServer).UnaryEcho(ctx, req.(*echoMsg))
	}
	if interceptor == nil {
		return handler(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: methodUnary}, handler)
}

// UnaryEcho: "fail" answers call 2's status, "sleep" waits for the
// context (call 4), anything else is echoed with the x-served-by header.
func (*echoServer) UnaryEcho(ctx context.Context, in *echoMsg) (*echoMsg, error) {
	switch in.Message {
	case "fail":
		return nil, failStatus().Err()
	case "sleep":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(servedByKey, servedByValue)); err != nil {
		return nil, err
	}
	return &echoMsg{Message: in.Message}, nil
}

// ServerStreamingEcho sends "<message> 0" at once, then "<message> i" every
// 20 ms until the call's context is done, and returns the context's error.
func serverStreamingEchoHandler(_ any, stream grpc.ServerStream) error {
	in := new(echoMsg)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	ctx := stream.Context()
	if err := stream.SetHeader(metadata.Pairs(servedByKey, servedByValue)); err != nil {
		return err
	}
	ticker := time.NewTicker(streamTick)
	defer ticker.Stop()
	for i := 0; ; i++ {
		if err := stream.SendMsg(&echoMsg{Message: fmt.Sprintf("%s %d", in.Message, i)}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// ClientStreamingEcho (not in the script) answers the messages joined by ",".
func clientStreamingEchoHandler(_ any, stream grpc.ServerStream) error {
	var got []string
	for {
		in := new(echoMsg)
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		got = append(got, in.Message)
	}
	if err := stream.SetHeader(metadata.Pairs(servedByKey, servedByValue)); err != nil {
		return err
	}
	return stream.SendMsg(&echoMsg{Message: strings.Join(got, ",")})
}

// BidirectionalStreamingEcho echoes every message and returns OK after the
// client's half-close.
func bidiEchoHandler(_ any, stream grpc.ServerStream) error {
	if err := stream.SetHeader(metadata.Pairs(servedByKey, servedByValue)); err != nil {
		return err
	}
	for {
		in := new(echoMsg)
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(&echoMsg{Message: in.Message}); err != nil {
			return err
		}
	}
}
