package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	"google.golang.org/grpc/channelz/service"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// entityKinds are the record kinds `shape` reports on.
var entityKinds = []string{"server", "server_socket", "listen_socket", "channel", "subchannel", "channel_socket"}

func runShape(args []string) error {
	fs := flag.NewFlagSet("shape", flag.ExitOnError)
	addr := fs.String("addr", "", "also walk the channelz service at this address (host:port)")
	page := fs.Int64("page", 1, "max_results for the listing calls")
	includeSelf := fs.Bool("include-self", false, "keep -addr's server socket for this program's own connection")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline for the whole run (not counting -serve-seconds)")
	serve := fs.Int("serve-seconds", 0, "") // hidden: keep the server up this long
	fs.Usage = usageWithout(fs, "serve-seconds")
	fs.Parse(args)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	srv, lis, local, err := startShapeServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := shapeCalls(ctx, conn); err != nil {
		return err
	}
	// The server side counts a call after the client has seen its
	// status; give it a moment so the counters have settled.
	time.Sleep(200 * time.Millisecond)

	shapes := map[string]map[string]bool{}
	if err := collectShape(ctx, "go", localChannelz{local}, *page, nil, shapes); err != nil {
		return fmt.Errorf("walking own channelz: %w", err)
	}
	if *addr != "" {
		dialer := &recordingDialer{}
		rconn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer.dial))
		if err != nil {
			return err
		}
		defer rconn.Close()
		var skip func(record) bool
		if !*includeSelf {
			skip = dialer.isOwnServerSocket
		}
		if err := collectShape(ctx, "remote", channelzpb.NewChannelzClient(rconn), *page, skip, shapes); err != nil {
			return fmt.Errorf("walking %s: %w", *addr, err)
		}
	}

	var lines []string
	for side, paths := range shapes {
		for p := range paths {
			lines = append(lines, "shape "+side+" "+p)
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}

	if *serve > 0 {
		fmt.Fprintf(os.Stderr, "listening %s\n", lis.Addr())
		time.Sleep(time.Duration(*serve) * time.Second)
	}
	return nil
}

// startShapeServer serves channelz, health and reflection on
// 127.0.0.1:0 and returns the channelz implementation for in-process use.
func startShapeServer() (*grpc.Server, net.Listener, channelzpb.ChannelzServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	srv := grpc.NewServer()
	service.RegisterChannelzServiceToServer(srv)
	var capture captureRegistrar
	service.RegisterChannelzServiceToServer(&capture)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go srv.Serve(lis)
	return srv, lis, capture.impl.(channelzpb.ChannelzServer), nil
}

// shapeCalls makes 3 OK health checks, one that fails with NOT_FOUND and
// one to an unimplemented method.
func shapeCalls(ctx context.Context, conn *grpc.ClientConn) error {
	hc := healthpb.NewHealthClient(conn)
	for i := 0; i < 3; i++ {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return fmt.Errorf("health check %d: %w", i, err)
		}
	}
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if status.Code(err) != codes.NotFound {
		return fmt.Errorf("check of an unknown service: got %v, want NotFound", err)
	}
	err = conn.Invoke(ctx, "/grpc.health.v1.Health/NoSuchMethod", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unimplemented {
		return fmt.Errorf("unimplemented method: got %v, want Unimplemented", err)
	}
	return nil
}

// collectShape walks cz and adds, per entity kind, the field paths its
// entities populate to shapes[side] as "<kind> <path>".
func collectShape(ctx context.Context, side string, cz channelzpb.ChannelzClient, page int64, skip func(record) bool, shapes map[string]map[string]bool) error {
	out := map[string]bool{}
	shapes[side] = out
	var errs []error
	w := newWalker(cz, page, func(r record) {
		if r.body == nil || !slices.Contains(entityKinds, r.kind) || (skip != nil && skip(r)) {
			return
		}
		raw, err := marshalOpts.Marshal(r.body)
		if err != nil {
			errs = append(errs, err)
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			errs = append(errs, err)
			return
		}
		fieldPaths(r.kind+" ", v, out)
	})
	if err := w.walk(ctx); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// fieldPaths adds the path of every field present in v: objects recurse
// with dot-joined names, arrays add "name[]" and recurse into every
// element (so the union covers e.g. trace events with and without a
// child ref).
func fieldPaths(prefix string, v any, out map[string]bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, val := range obj {
		p := prefix + k
		if arr, ok := val.([]any); ok {
			p += "[]"
			out[p] = true
			for _, el := range arr {
				fieldPaths(p+".", el, out)
			}
			continue
		}
		out[p] = true
		fieldPaths(p+".", val, out)
	}
}

// recordingDialer dials TCP and remembers the local address of every
// connection, so the remote's server socket for it can be recognised.
type recordingDialer struct {
	mu    sync.Mutex
	local []*net.TCPAddr
}

func (d *recordingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
			d.mu.Lock()
			d.local = append(d.local, a)
			d.mu.Unlock()
		}
	}
	return c, err
}

// isOwnServerSocket reports whether r is a server socket whose remote
// address is one of this program's own connections.
func (d *recordingDialer) isOwnServerSocket(r record) bool {
	if r.kind != "server_socket" {
		return false
	}
	remote := r.body.(*channelzpb.Socket).GetRemote().GetTcpipAddress()
	if remote == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.local {
		if net.IP(remote.GetIpAddress()).Equal(a.IP) && int(remote.GetPort()) == a.Port {
			return true
		}
	}
	return false
}
