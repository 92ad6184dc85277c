// Command channelz-go is grpc-go's side of tonic-hotpath's channelz
// interop test (gRFC A14, grpc.channelz.v1.Channelz):
//
//	channelz-go query -addr HOST:PORT [-page N]   walk a remote channelz tree, one JSON line per entity/check
//	channelz-go shape [-addr HOST:PORT]           which fields grpc-go (and the remote) populate, per entity kind
//	channelz-go load -addr HOST:PORT -calls N     N unary health checks from a grpc-go client
//
// See README.md for the output formats.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	_ "google.golang.org/grpc/channelz/service" // turns channelz on in this process
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const usage = `usage:
  channelz-go query -addr HOST:PORT [-page N] [-timeout D]
  channelz-go shape [-addr HOST:PORT] [-page N] [-include-self] [-timeout D]
  channelz-go load  -addr HOST:PORT [-calls N] [-timeout D]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "query":
		err = runQuery(args)
	case "shape":
		err = runShape(args)
	case "load":
		err = runLoad(args)
	default:
		fmt.Fprintf(os.Stderr, "unknown subcommand %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "channelz-go %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func runQuery(args []string) error {
	fs := flag.NewFlagSet("query", flag.ExitOnError)
	addr := fs.String("addr", "", "channelz server address (host:port)")
	page := fs.Int64("page", 1, "max_results for GetServers/GetServerSockets/GetTopChannels (0: server default, no size check)")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline for the whole walk")
	fs.Parse(args)
	if *addr == "" {
		return fmt.Errorf("-addr is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var werr error
	w := newWalker(channelzpb.NewChannelzClient(conn), *page, func(r record) {
		if werr == nil {
			werr = r.writeJSON(out)
		}
	})
	if err := w.walk(ctx); err != nil {
		return err
	}
	return werr
}

func runLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	addr := fs.String("addr", "", "server address (host:port)")
	calls := fs.Int("calls", 1, "unary grpc.health.v1.Health/Check calls to make, one after the other")
	timeout := fs.Duration("timeout", 10*time.Second, "deadline per call")
	fs.Parse(args)
	if *addr == "" {
		return fmt.Errorf("-addr is required")
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ok, failed := 0, 0
	for i := 0; i < *calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err != nil {
			if failed == 0 {
				fmt.Fprintf(os.Stderr, "call %d: %v\n", i, err)
			}
			failed++
			continue
		}
		ok++
	}
	fmt.Printf("ok %d\nfailed %d\n", ok, failed)
	return nil
}

// usageWithout is a flag.FlagSet Usage that leaves out hidden flags.
func usageWithout(fs *flag.FlagSet, hidden string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "usage of %s:\n", fs.Name())
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != hidden {
				fmt.Fprintf(fs.Output(), "  -%s (default %q)\n    \t%s\n", f.Name, f.DefValue, f.Usage)
			}
		})
	}
}
