package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	binlogpb "google.golang.org/grpc/binarylog/grpc_binarylog_v1"
	"google.golang.org/protobuf/proto"
)

// asMainEnv makes the test binary act as the program (see TestMain), so
// the tests can run the selfcheck, which runs its own executable.
const asMainEnv = "BINLOG_GO_AS_MAIN"

// The filters the Rust test runs the script with.
var defaultFilters = []string{
	"*",
	"*{h:64;m:8}",
	"hotpath.echo.Echo/*,-hotpath.echo.Echo/UnaryEcho",
}

// scriptCall is one call of the script as the log shows it.
type scriptCall struct {
	method string
	// The request messages, in order, and the response messages the client
	// reads; a server-streaming call's responses are "<request> i", i from
	// 0, as many as were sent (calls 3 and 8).
	requests, responses []string
	// The types of the client's and the server's entries, as a regular
	// expression over their abbreviations (see abbrev) joined by spaces.
	client, server string
	// The trailers' code and message: regular expressions over
	// "<code> <message>".
	clientStatus, serverStatus string
	details                    bool // status_details is failStatus()
	timeout                    bool // the CLIENT_HEADERs carry a timeout
}

// script is the expected grpc-go log of the script, per call, when the
// call's method is logged at all.
var script = []scriptCall{
	{method: methodUnary, requests: []string{"hello"}, responses: []string{"hello"},
		client: "CH CM SH SM ST", server: "CH CM SH SM ST",
		clientStatus: "0 ", serverStatus: "0 "},
	{method: methodUnary, requests: []string{"fail"},
		client: "CH CM ST", server: "CH CM ST",
		clientStatus: "3 bad request", serverStatus: "3 bad request", details: true},
	{method: methodServer, requests: []string{"stream"},
		client: "CH CM SH SM CANCEL", server: "CH CM SH SM( SM)* ST",
		serverStatus: "1 context canceled"},
	{method: methodUnary, requests: []string{"sleep"},
		client: "CH CM ST", server: "CH CM ST",
		clientStatus: "4 (context deadline exceeded|stream terminated by RST_STREAM with error code: CANCEL)",
		serverStatus: "(1 context canceled|4 context deadline exceeded)", timeout: true},
	{method: methodBidi, requests: []string{"a", "b"}, responses: []string{"a", "b"},
		client: "CH CM CM HC SH SM SM ST", server: "CH CM SH SM CM SM HC ST",
		clientStatus: "0 ", serverStatus: "0 "},
	{method: methodNope, requests: []string{"x"},
		client: "CH( CM)? ST", server: "",
		clientStatus: "12 unknown method Nope for service hotpath.echo.Echo"},
	{method: methodUnary, requests: []string{compressedText}, responses: []string{compressedText},
		client: "CH CM SH SM ST", server: "CH CM SH SM ST",
		clientStatus: "0 ", serverStatus: "0 "},
	// The client's stream is finished by its context's deadline (CANCEL) or,
	// when the transport's status wins that race, by DEADLINE_EXCEEDED. The
	// CANCEL is logged by the stream's context watcher: a RecvMsg under way
	// may log one more message after it.
	{method: methodServer, requests: []string{"watch"},
		client: "CH CM SH SM( SM)*( CANCEL( SM)?| ST)", server: "CH CM SH SM( SM)* ST",
		clientStatus: "4 (context deadline exceeded|stream terminated by RST_STREAM with error code: CANCEL)",
		serverStatus: "(1 context canceled|4 context deadline exceeded)", timeout: true},
}

var abbrevs = map[binlogpb.GrpcLogEntry_EventType]string{
	binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER:     "CH",
	binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_HEADER:     "SH",
	binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_MESSAGE:    "CM",
	binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_MESSAGE:    "SM",
	binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HALF_CLOSE: "HC",
	binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_TRAILER:    "ST",
	binlogpb.GrpcLogEntry_EVENT_TYPE_CANCEL:            "CANCEL",
}

func abbrev(t binlogpb.GrpcLogEntry_EventType) string {
	if a, ok := abbrevs[t]; ok {
		return a
	}
	return t.String()
}

// filterLimits is what a filter logs of a method: whether it is logged at
// all and the header and message limits (-1: unlimited). Only the filter
// shapes used here are understood.
func filterLimits(filter, method string) (logged bool, hdr, msg int, err error) {
	switch filter {
	case "*":
		return true, -1, -1, nil
	case "*{h:64;m:8}":
		return true, 64, 8, nil
	case "hotpath.echo.Echo/*,-hotpath.echo.Echo/UnaryEcho":
		return method != methodUnary, -1, -1, nil
	}
	return false, 0, 0, fmt.Errorf("selfcheck does not know what filter %q logs", filter)
}

// runChild runs `<this program> run <file>` under filter and returns the
// server address it printed and the entries it logged.
func runChild(filter string) (string, []*binlogpb.GrpcLogEntry, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "binlog-go-selfcheck-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	logFile := dir + "/binlog"
	cmd := exec.Command(exe, "run", logFile)
	cmd.Env = append(os.Environ(), "GRPC_BINARY_LOG_FILTER="+filter, asMainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("run under %q: %v\n%s", filter, err, stderr.String())
	}
	var addr struct {
		ServerAddress string `json:"server_address"`
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if err := json.Unmarshal([]byte(first), &addr); err != nil || addr.ServerAddress == "" {
		return "", nil, fmt.Errorf("run printed %q, want {\"server_address\":...}", first)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		return "", nil, err
	}
	entries, err := decodeEntries(data, "grpc")
	return addr.ServerAddress, entries, err
}

// group is one side of one call: its entries in sequence order.
type group struct {
	callID  uint64
	logger  binlogpb.GrpcLogEntry_Logger
	entries []*binlogpb.GrpcLogEntry
}

func (g *group) side() string {
	if g.logger == binlogpb.GrpcLogEntry_LOGGER_CLIENT {
		return "client"
	}
	return "server"
}

func (g *group) method() string {
	return g.entries[0].GetClientHeader().GetMethodName()
}

// groupEntries groups the entries by (logger, call_id), checks that each
// group's sequence ids are 1, 2, 3, ... and that it starts with a
// CLIENT_HEADER, and returns the client and the server groups in call id
// order.
func groupEntries(entries []*binlogpb.GrpcLogEntry) (client, server []*group, err error) {
	byID := map[uint64]*group{}
	for _, e := range entries {
		g := byID[e.GetCallId()]
		if g == nil {
			g = &group{callID: e.GetCallId(), logger: e.GetLogger()}
			byID[e.GetCallId()] = g
		}
		if g.logger != e.GetLogger() {
			return nil, nil, fmt.Errorf("call id %d is used by both loggers", g.callID)
		}
		g.entries = append(g.entries, e)
	}
	ids := make([]uint64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g := byID[id]
		sort.SliceStable(g.entries, func(i, j int) bool {
			return g.entries[i].GetSequenceIdWithinCall() < g.entries[j].GetSequenceIdWithinCall()
		})
		for i, e := range g.entries {
			if e.GetSequenceIdWithinCall() != uint64(i+1) {
				return nil, nil, fmt.Errorf("call id %d: entry %d has sequence id %d", id, i, e.GetSequenceIdWithinCall())
			}
		}
		if g.entries[0].GetType() != binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER {
			return nil, nil, fmt.Errorf("call id %d starts with %v", id, g.entries[0].GetType())
		}
		switch g.logger {
		case binlogpb.GrpcLogEntry_LOGGER_CLIENT:
			client = append(client, g)
		case binlogpb.GrpcLogEntry_LOGGER_SERVER:
			server = append(server, g)
		default:
			return nil, nil, fmt.Errorf("call id %d: logger %v", id, g.logger)
		}
	}
	return client, server, nil
}

// assign matches groups (in call id order) to script calls by method: the
// calls of one method are either all logged or none.
func assign(groups []*group) ([]*group, error) {
	out := make([]*group, len(script))
	i := 0
	for k, c := range script {
		if i < len(groups) && groups[i].method() == c.method {
			out[k] = groups[i]
			i++
		}
	}
	if i != len(groups) {
		return nil, fmt.Errorf("%s call id %d (%s) matches no call of the script", groups[i].side(), groups[i].callID, groups[i].method())
	}
	return out, nil
}

// mdSummary renders metadata as sorted "key=value" (bytes in hex for -bin
// keys) joined by ",".
func mdSummary(md *binlogpb.Metadata) string {
	var kv []string
	for _, e := range md.GetEntry() {
		v := string(e.GetValue())
		if strings.HasSuffix(e.GetKey(), "-bin") {
			v = hex.EncodeToString(e.GetValue())
		}
		kv = append(kv, e.GetKey()+"="+v)
	}
	slices.Sort(kv)
	return "[" + strings.Join(kv, ",") + "]"
}

// peerSummary is "-" without a peer, else "server-port" when it is the
// server's address, else "ipv4:other-port" (the client's side).
func peerSummary(p *binlogpb.Address, serverAddr string) string {
	if p == nil {
		return "-"
	}
	if p.GetType() == binlogpb.Address_TYPE_IPV4 && p.GetAddress()+":"+strconv.Itoa(int(p.GetIpPort())) == serverAddr {
		return "server-addr"
	}
	return fmt.Sprintf("%v:%s:client-port", strings.TrimPrefix(p.GetType().String(), "TYPE_"), p.GetAddress())
}

// summary is one entry as one line of the expected-log table.
func summary(e *binlogpb.GrpcLogEntry, serverAddr string) string {
	s := fmt.Sprintf("%d %s peer=%s", e.GetSequenceIdWithinCall(), strings.TrimPrefix(e.GetType().String(), "EVENT_TYPE_"), peerSummary(e.GetPeer(), serverAddr))
	switch e.GetType() {
	case binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER:
		h := e.GetClientHeader()
		auth := h.GetAuthority()
		if auth == serverAddr {
			auth = "server-addr"
		}
		timeout := "-"
		if h.GetTimeout() != nil {
			timeout = "set"
		}
		s += fmt.Sprintf(" md=%s method=%s authority=%s timeout=%s", mdSummary(h.GetMetadata()), h.GetMethodName(), auth, timeout)
	case binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_HEADER:
		s += " md=" + mdSummary(e.GetServerHeader().GetMetadata())
	case binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_MESSAGE, binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_MESSAGE:
		m := e.GetMessage()
		s += fmt.Sprintf(" length=%d data=%dB", m.GetLength(), len(m.GetData()))
	case binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_TRAILER:
		t := e.GetTrailer()
		s += fmt.Sprintf(" md=%s status=%d %q details=%dB", mdSummary(t.GetMetadata()), t.GetStatusCode(), t.GetStatusMessage(), len(t.GetStatusDetails()))
	}
	if e.GetPayloadTruncated() {
		s += " TRUNCATED"
	}
	return s
}

// checkGroup checks one side of call k under the given limits.
func checkGroup(c scriptCall, g *group, serverAddr string, msgLimit int) error {
	onClient := g.logger == binlogpb.GrpcLogEntry_LOGGER_CLIENT
	var types []string
	for _, e := range g.entries {
		types = append(types, abbrev(e.GetType()))
	}
	want := c.server
	if onClient {
		want = c.client
	}
	if !regexp.MustCompile("^(" + want + ")$").MatchString(strings.Join(types, " ")) {
		return fmt.Errorf("types %q, want %q", strings.Join(types, " "), want)
	}
	var reqs, resps int
	for _, e := range g.entries {
		// Which entries carry the peer: the server's CLIENT_HEADER, and
		// the client's SERVER_HEADER and SERVER_TRAILER.
		wantPeer := "-"
		switch {
		case !onClient && e.GetType() == binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER:
			wantPeer = "IPV4:127.0.0.1:client-port"
		case onClient && (e.GetType() == binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_HEADER || e.GetType() == binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_TRAILER):
			wantPeer = "server-addr"
		}
		if got := peerSummary(e.GetPeer(), serverAddr); got != wantPeer {
			return fmt.Errorf("seq %d: peer %s, want %s", e.GetSequenceIdWithinCall(), got, wantPeer)
		}
		if e.GetTimestamp() == nil {
			return fmt.Errorf("seq %d: no timestamp", e.GetSequenceIdWithinCall())
		}
		var err error
		switch e.GetType() {
		case binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HEADER:
			h := e.GetClientHeader()
			if h.GetMethodName() != c.method || h.GetAuthority() != serverAddr {
				err = fmt.Errorf("method %q authority %q", h.GetMethodName(), h.GetAuthority())
			} else if got := mdSummary(h.GetMetadata()); got != "[x-blob-bin=000102,x-user=alice]" {
				err = fmt.Errorf("metadata %s", got)
			} else if e.GetPayloadTruncated() {
				err = errors.New("truncated")
			} else if c.timeout != (h.GetTimeout() != nil) {
				err = fmt.Errorf("timeout %v", h.GetTimeout())
			} else if d := h.GetTimeout().AsDuration(); c.timeout && (d <= 0 || d > sleepDeadline) {
				err = fmt.Errorf("timeout %v, want in (0, %v]", d, sleepDeadline)
			}
		case binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_HEADER:
			if got := mdSummary(e.GetServerHeader().GetMetadata()); got != "[x-served-by=echo]" || e.GetPayloadTruncated() {
				err = fmt.Errorf("metadata %s truncated %v", got, e.GetPayloadTruncated())
			}
		case binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_MESSAGE, binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_MESSAGE:
			var text string
			if e.GetType() == binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_MESSAGE {
				text = c.requests[reqs]
				reqs++
			} else if c.method == methodServer {
				text = fmt.Sprintf("%s %d", c.requests[0], resps)
				resps++
			} else {
				text = c.responses[resps]
				resps++
			}
			err = checkMessage(e, text, msgLimit)
		case binlogpb.GrpcLogEntry_EVENT_TYPE_SERVER_TRAILER:
			t := e.GetTrailer()
			got := fmt.Sprintf("%d %s", t.GetStatusCode(), t.GetStatusMessage())
			wantStatus := c.serverStatus
			if onClient {
				wantStatus = c.clientStatus
			}
			var details []byte
			if c.details {
				details, _ = proto.Marshal(failStatus().Proto())
			}
			if !regexp.MustCompile("^(" + wantStatus + ")$").MatchString(got) {
				err = fmt.Errorf("status %q, want %q", got, wantStatus)
			} else if !bytes.Equal(t.GetStatusDetails(), details) {
				err = fmt.Errorf("status details %x, want %x", t.GetStatusDetails(), details)
			} else if len(t.GetMetadata().GetEntry()) != 0 || e.GetPayloadTruncated() {
				err = fmt.Errorf("trailer metadata %s truncated %v", mdSummary(t.GetMetadata()), e.GetPayloadTruncated())
			}
		default:
			if e.GetPayload() != nil || e.GetPayloadTruncated() {
				err = fmt.Errorf("payload %v", e.GetPayload())
			}
		}
		if err != nil {
			return fmt.Errorf("seq %d %v: %v", e.GetSequenceIdWithinCall(), e.GetType(), err)
		}
	}
	return nil
}

// checkMessage checks a message entry against the text it carries,
// truncated to msgLimit bytes (-1: not truncated).
func checkMessage(e *binlogpb.GrpcLogEntry, text string, msgLimit int) error {
	full := (&echoMsg{Message: text}).marshal()
	data, truncated := full, false
	if msgLimit >= 0 && len(full) > msgLimit {
		data, truncated = full[:msgLimit], true
	}
	m := e.GetMessage()
	if int(m.GetLength()) != len(full) || !bytes.Equal(m.GetData(), data) || e.GetPayloadTruncated() != truncated {
		return fmt.Errorf("length %d data %x truncated %v, want %d %x %v", m.GetLength(), m.GetData(), e.GetPayloadTruncated(), len(full), data, truncated)
	}
	return nil
}

// checkRun checks one run's log against the script and returns its
// expected-log table and, per call and side, its type sequence and
// trailer status (to count timing-dependent variants).
func checkRun(filter, serverAddr string, entries []*binlogpb.GrpcLogEntry) (table []string, variants []string, err error) {
	clientGroups, serverGroups, err := groupEntries(entries)
	if err != nil {
		return nil, nil, err
	}
	clients, err := assign(clientGroups)
	if err != nil {
		return nil, nil, err
	}
	servers, err := assign(serverGroups)
	if err != nil {
		return nil, nil, err
	}
	for k, c := range script {
		logged, _, msg, err := filterLimits(filter, c.method)
		if err != nil {
			return nil, nil, err
		}
		for _, side := range []string{"client", "server"} {
			g := servers[k]
			if side == "client" {
				g = clients[k]
			}
			wantLogged := logged && (side == "client" || c.server != "")
			if (g != nil) != wantLogged {
				return nil, nil, fmt.Errorf("call %d: %s logged %v, want %v", k+1, side, g != nil, wantLogged)
			}
			if g == nil {
				table = append(table, fmt.Sprintf("call %d %s: (nothing)", k+1, side))
				continue
			}
			if err := checkGroup(c, g, serverAddr, msg); err != nil {
				return nil, nil, fmt.Errorf("call %d %s (call id %d): %v", k+1, side, g.callID, err)
			}
			var types []string
			for _, e := range g.entries {
				table = append(table, fmt.Sprintf("call %d %s id=%d seq=%s", k+1, side, g.callID, summary(e, serverAddr)))
				t := abbrev(e.GetType())
				if tr := e.GetTrailer(); tr != nil {
					t += fmt.Sprintf("(%d %s)", tr.GetStatusCode(), tr.GetStatusMessage())
				}
				types = append(types, t)
			}
			variants = append(variants, fmt.Sprintf("call %d %s: %s", k+1, side, strings.Join(types, " ")))
		}
	}
	return table, variants, nil
}

// selfcheckCmd is `binlog-go selfcheck [-n N] [filter ...]`.
func selfcheckCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("selfcheck", flag.ContinueOnError)
	n := fs.Int("n", 1, "runs per filter; variants of timing-dependent calls are counted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	filters := fs.Args()
	if len(filters) == 0 {
		filters = defaultFilters
	}
	for _, filter := range filters {
		counts := map[string]int{}
		var order []string
		var table []string
		start := time.Now()
		for run := 0; run < *n; run++ {
			addr, entries, err := runChild(filter)
			if err != nil {
				return err
			}
			t, variants, err := checkRun(filter, addr, entries)
			if err != nil {
				return fmt.Errorf("filter %q, run %d: %v", filter, run+1, err)
			}
			if run == 0 {
				table = t
			}
			for _, v := range variants {
				if counts[v] == 0 {
					order = append(order, v)
				}
				counts[v]++
			}
		}
		fmt.Fprintf(out, "== GRPC_BINARY_LOG_FILTER=%s: %d run(s) OK in %v\n", filter, *n, time.Since(start).Round(time.Millisecond))
		for _, line := range table {
			fmt.Fprintln(out, line)
		}
		if *n > 1 {
			fmt.Fprintf(out, "-- (logger, type) sequences over %d runs:\n", *n)
			for _, v := range order {
				fmt.Fprintf(out, "%4d× %s\n", counts[v], v)
			}
		}
	}
	return nil
}
