// Command wrr is grpc-go's weighted_round_robin (gRFC A58) over the tonic
// servers it is given: it dials them through a manual resolver, warms up
// until the policy uses the weights the servers' ORCA reports give (per
// call, or out of band with -oob), then makes -calls UnaryCalls one at a
// time and prints, as one JSON object, how many each server answered (by
// SimpleResponse.server_id, asked for with fill_server_id).
//
// With -policy=round_robin, or -wait_weights=false (servers that send no
// reports), it only waits until every server has answered once.
//
// Whether the weights are in use is read from the policy's own metrics
// (grpc.lb.wrr.endpoint_weights, recorded for each endpoint each time the
// scheduler is rebuilt, every weightUpdatePeriod): after every server has
// answered (so the picker holds all of them), 3×N weights in a row above
// zero mean at least two full rebuilds with every weight set.
//
// Exit status: 0 with the JSON on stdout; 1 with the reason on stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin"
	"google.golang.org/grpc/credentials/insecure"
	estats "google.golang.org/grpc/experimental/stats"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/stats"
)

var (
	addrs       = flag.String("addrs", "", "comma-separated host:port of the servers")
	policy      = flag.String("policy", "weighted_round_robin", "weighted_round_robin or round_robin")
	oob         = flag.Bool("oob", false, "weights from out-of-band reports (enableOobLoadReport) rather than per-call trailers")
	oobPeriod   = flag.Duration("oob_period", time.Second, "oobReportingPeriod asked of the servers with -oob")
	calls       = flag.Int("calls", 3000, "UnaryCalls counted after the warm-up")
	waitWeights = flag.Bool("wait_weights", true, "with weighted_round_robin: warm up until every endpoint's weight is in use")
	timeout     = flag.Duration("timeout", 60*time.Second, "deadline for the whole run")
)

// result is what the program prints.
type result struct {
	Policy      string         `json:"policy"`
	OOB         bool           `json:"oob"`
	WarmupCalls int            `json:"warmup_calls"`
	Calls       int            `json:"calls"`
	ByServer    map[string]int `json:"by_server"`
	// The weights of the last scheduler rebuilds (N values each), as the
	// policy recorded them (empty with round_robin).
	LastWeights []float64 `json:"last_weights"`
}

// weightWatcher is a stats handler that is also a metrics recorder: grpc-go
// hands a ClientConn's metrics to the stats handlers that implement
// estats.MetricsRecorder, which is how the policy's weights are read.
type weightWatcher struct {
	// Embedded (nil) only for the interface's unexported method; every
	// method the policy calls is implemented below.
	estats.MetricsRecorder

	mu sync.Mutex
	// run counts the weights above zero recorded in a row since reset.
	run  int
	last []float64
}

func (w *weightWatcher) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.run = 0
}

func (w *weightWatcher) state() (int, []float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.run, append([]float64(nil), w.last...)
}

func (w *weightWatcher) RecordFloat64Histo(h *estats.Float64HistoHandle, v float64, _ ...string) {
	if h.Descriptor().Name != "grpc.lb.wrr.endpoint_weights" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if v > 0 {
		w.run++
	} else {
		w.run = 0
	}
	w.last = append(w.last, v)
	if len(w.last) > 12 {
		w.last = w.last[len(w.last)-12:]
	}
}

func (*weightWatcher) RecordInt64Count(*estats.Int64CountHandle, int64, ...string)             {}
func (*weightWatcher) RecordFloat64Count(*estats.Float64CountHandle, float64, ...string)       {}
func (*weightWatcher) RecordInt64Histo(*estats.Int64HistoHandle, int64, ...string)             {}
func (*weightWatcher) RecordInt64Gauge(*estats.Int64GaugeHandle, int64, ...string)             {}
func (*weightWatcher) RecordInt64UpDownCount(*estats.Int64UpDownCountHandle, int64, ...string) {}
func (*weightWatcher) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}

func (*weightWatcher) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (*weightWatcher) HandleRPC(context.Context, stats.RPCStats)                         {}
func (*weightWatcher) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*weightWatcher) HandleConn(context.Context, stats.ConnStats)                       {}

func serviceConfig() string {
	if *policy != "weighted_round_robin" {
		return fmt.Sprintf(`{"loadBalancingConfig":[{%q:{}}]}`, *policy)
	}
	cfg := map[string]any{
		"blackoutPeriod":     "0s",
		"weightUpdatePeriod": "0.1s",
		// Far past the run: a weight never goes stale during it.
		"weightExpirationPeriod": "300s",
	}
	if *oob {
		cfg["enableOobLoadReport"] = true
		cfg["oobReportingPeriod"] = fmt.Sprintf("%gs", oobPeriod.Seconds())
	}
	b, err := json.Marshal(map[string]any{
		"loadBalancingConfig": []any{map[string]any{"weighted_round_robin": cfg}},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "wrr: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	servers := strings.Split(*addrs, ",")
	if *addrs == "" || len(servers) < 2 {
		fail("-addrs needs at least two servers")
	}
	var endpoints []resolver.Endpoint
	for _, a := range servers {
		endpoints = append(endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r := manual.NewBuilderWithScheme("orcawrr")
	r.InitialState(resolver.State{Endpoints: endpoints})
	watcher := &weightWatcher{}
	cc, err := grpc.NewClient(r.Scheme()+":///tonic",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig()),
		grpc.WithStatsHandler(watcher),
	)
	if err != nil {
		fail("NewClient: %v", err)
	}
	defer cc.Close()
	client := testgrpc.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	call := func() string {
		resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{FillServerId: true}, grpc.WaitForReady(true))
		if err != nil {
			_, last := watcher.state()
			fail("UnaryCall: %v (last weights %v)", err, last)
		}
		if resp.GetServerId() == "" {
			fail("a response without server_id")
		}
		return resp.GetServerId()
	}

	// Warm-up: every server answers once, then (weighted_round_robin) the
	// weights are in use.
	warmup := 0
	seen := map[string]bool{}
	for len(seen) < len(servers) {
		seen[call()] = true
		warmup++
	}
	if *policy == "weighted_round_robin" && *waitWeights {
		watcher.reset()
		for {
			if run, _ := watcher.state(); run >= 3*len(servers) {
				break
			}
			call()
			warmup++
		}
	}

	res := result{Policy: *policy, OOB: *oob, WarmupCalls: warmup, Calls: *calls, ByServer: map[string]int{}}
	for i := 0; i < *calls; i++ {
		res.ByServer[call()]++
	}
	_, res.LastWeights = watcher.state()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail("writing the result: %v", err)
	}
}
