package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	binlogpb "google.golang.org/grpc/binarylog/grpc_binarylog_v1"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// TestMain lets the selfcheck run this test binary as the program itself.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// readmeDetailsHex is failStatus() serialized, as README.md gives it.
const readmeDetailsHex = "0803120b6261642072657175657374" + "1a390a2d747970652e676f6f676c65617069732e636f6d2f686f74706174682e6563686f2e4563686f526573706f6e7365" + "1208" + "0a06" + "64657461696c"

// The fixed bytes README.md gives the Rust side.
func TestFixedBytes(t *testing.T) {
	details, err := proto.Marshal(failStatus().Proto())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"status details", hex.EncodeToString(details), readmeDetailsHex},
		{"hello", hex.EncodeToString((&echoMsg{Message: "hello"}).marshal()), "0a0568656c6c6f"},
		{"compressed", hex.EncodeToString((&echoMsg{Message: compressedText}).marshal()[:8]), "0af403636f6d7072"},
		{"empty", hex.EncodeToString((&echoMsg{}).marshal()), ""},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	var m echoMsg
	if err := m.unmarshal((&echoMsg{Message: compressedText}).marshal()); err != nil || m.Message != compressedText {
		t.Errorf("round trip: %v %d bytes", err, len(m.Message))
	}
	// An unknown field is skipped.
	if err := m.unmarshal([]byte{0x10, 0x01, 0x0a, 0x01, 'x'}); err != nil || m.Message != "x" {
		t.Errorf("unknown field: %v %q", err, m.Message)
	}
}

func TestDecodeFraming(t *testing.T) {
	entries := []*binlogpb.GrpcLogEntry{
		{CallId: 1, SequenceIdWithinCall: 1, Type: binlogpb.GrpcLogEntry_EVENT_TYPE_CANCEL, Logger: binlogpb.GrpcLogEntry_LOGGER_CLIENT},
		{CallId: 2, SequenceIdWithinCall: 7, Type: binlogpb.GrpcLogEntry_EVENT_TYPE_CLIENT_HALF_CLOSE, Logger: binlogpb.GrpcLogEntry_LOGGER_SERVER},
	}
	var grpcFile, varintFile bytes.Buffer
	for _, e := range entries {
		b, _ := proto.Marshal(e)
		grpcFile.Write([]byte{0, 0, 0, byte(len(b))})
		grpcFile.Write(b)
		if _, err := protodelim.MarshalTo(&varintFile, e); err != nil {
			t.Fatal(err)
		}
	}
	for framing, data := range map[string][]byte{"grpc": grpcFile.Bytes(), "varint": varintFile.Bytes()} {
		got, err := decodeEntries(data, framing)
		if err != nil || len(got) != 2 || !proto.Equal(got[0], entries[0]) || !proto.Equal(got[1], entries[1]) {
			t.Errorf("%s: %v %v", framing, got, err)
		}
		if got, err := decodeEntries(nil, framing); err != nil || len(got) != 0 {
			t.Errorf("%s empty: %v %v", framing, got, err)
		}
		if _, err := decodeEntries(data[:len(data)-1], framing); err == nil {
			t.Errorf("%s: truncated file decoded", framing)
		}
	}
	if _, err := decodeEntries([]byte{0, 0}, "grpc"); err == nil {
		t.Error("truncated prefix decoded")
	}
	if _, err := decodeEntries([]byte{0, 0, 0, 2, 0xff, 0xff}, "grpc"); err == nil {
		t.Error("garbage entry decoded")
	}
	if _, err := decodeEntries(nil, "json"); err == nil {
		t.Error("unknown framing accepted")
	}
	line, err := entryJSON(entries[1])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"call_id":"2","sequence_id_within_call":"7","type":"EVENT_TYPE_CLIENT_HALF_CLOSE","logger":"LOGGER_SERVER"}`; string(line) != want {
		t.Errorf("json %s, want %s", line, want)
	}
}

// TestScript runs the selfcheck (the script in a child process, the checks
// on its log) under every filter.
func TestScript(t *testing.T) {
	var out bytes.Buffer
	if err := selfcheckCmd(nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "call 6 server: (nothing)") {
		t.Errorf("unexpected table:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
