package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// missingID is an id no channelz implementation hands out in a test
// process; every Get* call with it must fail with NOT_FOUND.
const missingID int64 = 9223372036854775000

// attr is one extra key of a record, printed in order after "kind".
type attr struct {
	name  string
	value any
}

// record is one line of `query` output: a kind, a few scalar attributes
// and, for entities, the entity itself under bodyKey.
type record struct {
	kind    string
	attrs   []attr
	bodyKey string
	body    proto.Message
}

var marshalOpts = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// writeJSON prints r as one JSON object with "kind" first, then the
// attributes, then the protojson-rendered body.
func (r record) writeJSON(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString(`{"kind":`)
	k, _ := json.Marshal(r.kind)
	b.Write(k)
	for _, a := range r.attrs {
		v, err := json.Marshal(a.value)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, `,%q:%s`, a.name, v)
	}
	if r.body != nil {
		raw, err := marshalOpts.Marshal(r.body)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, `,%q:`, r.bodyKey)
		// protojson deliberately varies its whitespace; compact it.
		if err := json.Compact(&b, raw); err != nil {
			return err
		}
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// walker walks a process's whole channelz tree through cz, handing
// every entity and check result to emit.
type walker struct {
	cz channelzpb.ChannelzClient
	// page is max_results for the listing calls; 0 sends 0 (the
	// server's default page size) and skips the page size check.
	page int64
	emit func(record)

	seenChannels    map[int64]bool
	seenSubchannels map[int64]bool
}

func newWalker(cz channelzpb.ChannelzClient, page int64, emit func(record)) *walker {
	return &walker{
		cz:              cz,
		page:            page,
		emit:            emit,
		seenChannels:    map[int64]bool{},
		seenSubchannels: map[int64]bool{},
	}
}

// paginate calls fetch(start, max) until it reports end, checking page
// sizes and that ids rise strictly, and returns every item and the number
// of requests it took.
func paginate[T any](w *walker, method string, fetch func(start int64) ([]T, bool, error), id func(T) int64) ([]T, int, error) {
	var all []T
	start, last, pages := int64(0), int64(-1), 0
	for {
		items, end, err := fetch(start)
		pages++
		if err != nil {
			return nil, pages, fmt.Errorf("%s (start %d, page %d): %w", method, start, pages, err)
		}
		if w.page > 0 && int64(len(items)) > w.page {
			return nil, pages, fmt.Errorf("%s (start %d): returned %d entries, max_results was %d", method, start, len(items), w.page)
		}
		for _, it := range items {
			i := id(it)
			if i < start {
				return nil, pages, fmt.Errorf("%s (start %d): returned id %d below the start id", method, start, i)
			}
			if i <= last {
				return nil, pages, fmt.Errorf("%s (start %d): id %d after id %d, ids must rise strictly", method, start, i, last)
			}
			last = i
		}
		all = append(all, items...)
		if end {
			return all, pages, nil
		}
		if len(items) == 0 {
			return nil, pages, fmt.Errorf("%s (start %d): empty page with end=false", method, start)
		}
		start = last + 1
	}
}

func (w *walker) walk(ctx context.Context) error {
	if err := w.walkServers(ctx); err != nil {
		return err
	}
	if err := w.walkChannels(ctx); err != nil {
		return err
	}
	return w.checkNotFound(ctx)
}

func (w *walker) walkServers(ctx context.Context) error {
	servers, pages, err := paginate(w, "GetServers", func(start int64) ([]*channelzpb.Server, bool, error) {
		r, err := w.cz.GetServers(ctx, &channelzpb.GetServersRequest{StartServerId: start, MaxResults: w.page})
		return r.GetServer(), r.GetEnd(), err
	}, func(s *channelzpb.Server) int64 { return s.GetRef().GetServerId() })
	if err != nil {
		return err
	}
	w.emit(record{kind: "pages", attrs: []attr{{"method", "GetServers"}, {"pages", pages}}})

	for _, listed := range servers {
		id := listed.GetRef().GetServerId()
		r, err := w.cz.GetServer(ctx, &channelzpb.GetServerRequest{ServerId: id})
		if err != nil {
			return fmt.Errorf("GetServer(%d): %w", id, err)
		}
		if !proto.Equal(r.GetServer().GetRef(), listed.GetRef()) {
			return fmt.Errorf("GetServer(%d): ref %v differs from GetServers' %v", id, r.GetServer().GetRef(), listed.GetRef())
		}
		w.emit(record{kind: "server", bodyKey: "server", body: r.GetServer()})

		refs, pages, err := paginate(w, "GetServerSockets", func(start int64) ([]*channelzpb.SocketRef, bool, error) {
			r, err := w.cz.GetServerSockets(ctx, &channelzpb.GetServerSocketsRequest{ServerId: id, StartSocketId: start, MaxResults: w.page})
			return r.GetSocketRef(), r.GetEnd(), err
		}, func(s *channelzpb.SocketRef) int64 { return s.GetSocketId() })
		if err != nil {
			return fmt.Errorf("server %d: %w", id, err)
		}
		w.emit(record{kind: "pages", attrs: []attr{{"method", "GetServerSockets"}, {"server_id", id}, {"pages", pages}}})
		if err := w.sockets(ctx, refs, "server_socket", attr{"server_id", id}); err != nil {
			return err
		}
		if err := w.sockets(ctx, r.GetServer().GetListenSocket(), "listen_socket", attr{"server_id", id}); err != nil {
			return err
		}
	}
	return nil
}

// sockets fetches each referenced socket (in id order), checks that its
// ref equals the referring one and emits it.
func (w *walker) sockets(ctx context.Context, refs []*channelzpb.SocketRef, kind string, parent attr) error {
	for _, ref := range sortedByID(refs, (*channelzpb.SocketRef).GetSocketId) {
		r, err := w.cz.GetSocket(ctx, &channelzpb.GetSocketRequest{SocketId: ref.GetSocketId()})
		if err != nil {
			return fmt.Errorf("GetSocket(%d) (%s of %s %v): %w", ref.GetSocketId(), kind, parent.name, parent.value, err)
		}
		if !proto.Equal(r.GetSocket().GetRef(), ref) {
			return fmt.Errorf("GetSocket(%d): ref %v differs from the referring %v", ref.GetSocketId(), r.GetSocket().GetRef(), ref)
		}
		w.emit(record{kind: kind, attrs: []attr{parent}, bodyKey: "socket", body: r.GetSocket()})
	}
	return nil
}

func (w *walker) walkChannels(ctx context.Context) error {
	channels, pages, err := paginate(w, "GetTopChannels", func(start int64) ([]*channelzpb.Channel, bool, error) {
		r, err := w.cz.GetTopChannels(ctx, &channelzpb.GetTopChannelsRequest{StartChannelId: start, MaxResults: w.page})
		return r.GetChannel(), r.GetEnd(), err
	}, func(c *channelzpb.Channel) int64 { return c.GetRef().GetChannelId() })
	if err != nil {
		return err
	}
	w.emit(record{kind: "pages", attrs: []attr{{"method", "GetTopChannels"}, {"pages", pages}}})
	for _, listed := range channels {
		if err := w.channel(ctx, listed.GetRef(), nil); err != nil {
			return err
		}
	}
	return nil
}

// channel fetches one channel and everything below it. parent is nil for
// a top channel, else the parent's attribute (parent_channel_id or
// parent_subchannel_id).
func (w *walker) channel(ctx context.Context, ref *channelzpb.ChannelRef, parent *attr) error {
	id := ref.GetChannelId()
	if w.seenChannels[id] {
		return nil
	}
	w.seenChannels[id] = true
	r, err := w.cz.GetChannel(ctx, &channelzpb.GetChannelRequest{ChannelId: id})
	if err != nil {
		return fmt.Errorf("GetChannel(%d): %w", id, err)
	}
	ch := r.GetChannel()
	if !proto.Equal(ch.GetRef(), ref) {
		return fmt.Errorf("GetChannel(%d): ref %v differs from the referring %v", id, ch.GetRef(), ref)
	}
	var attrs []attr
	if parent != nil {
		attrs = append(attrs, *parent)
	}
	w.emit(record{kind: "channel", attrs: attrs, bodyKey: "channel", body: ch})
	return w.children(ctx, ch.GetChannelRef(), ch.GetSubchannelRef(), ch.GetSocketRef(), "channel", id)
}

func (w *walker) subchannel(ctx context.Context, ref *channelzpb.SubchannelRef, parent attr) error {
	id := ref.GetSubchannelId()
	if w.seenSubchannels[id] {
		return nil
	}
	w.seenSubchannels[id] = true
	r, err := w.cz.GetSubchannel(ctx, &channelzpb.GetSubchannelRequest{SubchannelId: id})
	if err != nil {
		return fmt.Errorf("GetSubchannel(%d): %w", id, err)
	}
	sc := r.GetSubchannel()
	if !proto.Equal(sc.GetRef(), ref) {
		return fmt.Errorf("GetSubchannel(%d): ref %v differs from the referring %v", id, sc.GetRef(), ref)
	}
	w.emit(record{kind: "subchannel", attrs: []attr{parent}, bodyKey: "subchannel", body: sc})
	return w.children(ctx, sc.GetChannelRef(), sc.GetSubchannelRef(), sc.GetSocketRef(), "subchannel", id)
}

// children walks the nested channels, subchannels and sockets of the
// channel or subchannel kind/id, each list in id order.
func (w *walker) children(ctx context.Context, chans []*channelzpb.ChannelRef, subs []*channelzpb.SubchannelRef, socks []*channelzpb.SocketRef, kind string, id int64) error {
	for _, c := range sortedByID(chans, (*channelzpb.ChannelRef).GetChannelId) {
		if err := w.channel(ctx, c, &attr{"parent_" + kind + "_id", id}); err != nil {
			return err
		}
	}
	subParent := attr{"channel_id", id}
	if kind == "subchannel" {
		subParent = attr{"parent_subchannel_id", id}
	}
	for _, s := range sortedByID(subs, (*channelzpb.SubchannelRef).GetSubchannelId) {
		if err := w.subchannel(ctx, s, subParent); err != nil {
			return err
		}
	}
	return w.sockets(ctx, socks, "channel_socket", attr{kind + "_id", id})
}

// checkNotFound asks every Get* method for missingID and emits one line
// per method with the status code it got.
func (w *walker) checkNotFound(ctx context.Context) error {
	calls := []struct {
		method string
		call   func() (proto.Message, error)
	}{
		{"GetServer", func() (proto.Message, error) {
			return w.cz.GetServer(ctx, &channelzpb.GetServerRequest{ServerId: missingID})
		}},
		{"GetChannel", func() (proto.Message, error) {
			return w.cz.GetChannel(ctx, &channelzpb.GetChannelRequest{ChannelId: missingID})
		}},
		{"GetSubchannel", func() (proto.Message, error) {
			return w.cz.GetSubchannel(ctx, &channelzpb.GetSubchannelRequest{SubchannelId: missingID})
		}},
		{"GetSocket", func() (proto.Message, error) {
			return w.cz.GetSocket(ctx, &channelzpb.GetSocketRequest{SocketId: missingID})
		}},
		{"GetServerSockets", func() (proto.Message, error) {
			return w.cz.GetServerSockets(ctx, &channelzpb.GetServerSocketsRequest{ServerId: missingID})
		}},
	}
	var bad []string
	for _, c := range calls {
		resp, err := c.call()
		code := status.Code(err)
		w.emit(record{kind: "not_found", attrs: []attr{{"method", c.method}, {"code", code.String()}}})
		// grpc-go answers GetServerSockets for an unknown server with OK,
		// no sockets and end=true; every other Get* with NotFound.
		if r, ok := resp.(*channelzpb.GetServerSocketsResponse); ok || c.method == "GetServerSockets" {
			if err == nil && len(r.GetSocketRef()) == 0 && r.GetEnd() {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s(%d) returned %s (%v), want OK with no sockets and end=true, as grpc-go", c.method, missingID, code, err))
			continue
		}
		if code == codes.NotFound {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s(%d) returned %s (%v), want NotFound", c.method, missingID, code, err))
	}
	if len(bad) > 0 {
		return fmt.Errorf("not-found checks failed: %v", bad)
	}
	return nil
}

func sortedByID[T any](refs []T, id func(T) int64) []T {
	out := slices.Clone(refs)
	slices.SortFunc(out, func(a, b T) int { return cmpInt64(id(a), id(b)) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// localChannelz adapts grpc-go's in-process channelz service to the
// client interface, so `shape` can walk its own process without opening
// a connection that would itself show up in channelz.
type localChannelz struct{ srv channelzpb.ChannelzServer }

var _ channelzpb.ChannelzClient = localChannelz{}

func (l localChannelz) GetTopChannels(ctx context.Context, in *channelzpb.GetTopChannelsRequest, _ ...grpc.CallOption) (*channelzpb.GetTopChannelsResponse, error) {
	return l.srv.GetTopChannels(ctx, in)
}

func (l localChannelz) GetServers(ctx context.Context, in *channelzpb.GetServersRequest, _ ...grpc.CallOption) (*channelzpb.GetServersResponse, error) {
	return l.srv.GetServers(ctx, in)
}

func (l localChannelz) GetServer(ctx context.Context, in *channelzpb.GetServerRequest, _ ...grpc.CallOption) (*channelzpb.GetServerResponse, error) {
	return l.srv.GetServer(ctx, in)
}

func (l localChannelz) GetServerSockets(ctx context.Context, in *channelzpb.GetServerSocketsRequest, _ ...grpc.CallOption) (*channelzpb.GetServerSocketsResponse, error) {
	return l.srv.GetServerSockets(ctx, in)
}

func (l localChannelz) GetChannel(ctx context.Context, in *channelzpb.GetChannelRequest, _ ...grpc.CallOption) (*channelzpb.GetChannelResponse, error) {
	return l.srv.GetChannel(ctx, in)
}

func (l localChannelz) GetSubchannel(ctx context.Context, in *channelzpb.GetSubchannelRequest, _ ...grpc.CallOption) (*channelzpb.GetSubchannelResponse, error) {
	return l.srv.GetSubchannel(ctx, in)
}

func (l localChannelz) GetSocket(ctx context.Context, in *channelzpb.GetSocketRequest, _ ...grpc.CallOption) (*channelzpb.GetSocketResponse, error) {
	return l.srv.GetSocket(ctx, in)
}

// captureRegistrar is a grpc.ServiceRegistrar that keeps the
// implementation registered with it.
type captureRegistrar struct{ impl any }

func (c *captureRegistrar) RegisterService(_ *grpc.ServiceDesc, impl any) { c.impl = impl }
