package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	binlogpb "google.golang.org/grpc/binarylog/grpc_binarylog_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// decodeEntries splits a log file into GrpcLogEntry messages. framing is
// "grpc" (grpc-go: 4-byte big-endian length prefix) or "varint" (grpc-java:
// varint length prefix, as writeDelimitedTo). An empty file has no entries;
// a file that ends inside a prefix or an entry, an entry that does not
// parse, or one without type or logger, is an error.
func decodeEntries(data []byte, framing string) ([]*binlogpb.GrpcLogEntry, error) {
	if framing != "grpc" && framing != "varint" {
		return nil, fmt.Errorf("unknown framing %q (want grpc or varint)", framing)
	}
	var entries []*binlogpb.GrpcLogEntry
	for off := 0; off < len(data); {
		var size uint64
		switch framing {
		case "grpc":
			if len(data)-off < 4 {
				return nil, fmt.Errorf("entry %d at offset %d: truncated 4-byte length prefix (%d bytes left)", len(entries), off, len(data)-off)
			}
			size = uint64(binary.BigEndian.Uint32(data[off:]))
			off += 4
		case "varint":
			v, n := protowire.ConsumeVarint(data[off:])
			if n < 0 {
				return nil, fmt.Errorf("entry %d at offset %d: bad varint length prefix: %v", len(entries), off, protowire.ParseError(n))
			}
			size = v
			off += n
		}
		if size > uint64(len(data)-off) {
			return nil, fmt.Errorf("entry %d at offset %d: length %d but only %d bytes left", len(entries), off, size, len(data)-off)
		}
		e := new(binlogpb.GrpcLogEntry)
		if err := proto.Unmarshal(data[off:off+int(size)], e); err != nil {
			return nil, fmt.Errorf("entry %d at offset %d: %v", len(entries), off, err)
		}
		// Every A16 entry has a type and a logger; an entry without is most
		// likely the other framing read by mistake.
		if e.GetType() == binlogpb.GrpcLogEntry_EVENT_TYPE_UNKNOWN || e.GetLogger() == binlogpb.GrpcLogEntry_LOGGER_UNKNOWN {
			return nil, fmt.Errorf("entry %d at offset %d: no type or no logger (wrong framing?)", len(entries), off)
		}
		entries = append(entries, e)
		off += int(size)
	}
	return entries, nil
}

// entryJSON renders one entry as a single line of protojson (proto field
// names, unpopulated fields left out), compacted: protojson itself
// randomly adds whitespace.
func entryJSON(e *binlogpb.GrpcLogEntry) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}.Marshal(e)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// decodeCmd is `binlog-go decode <file> <grpc|varint>`.
func decodeCmd(path, framing string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	entries, err := decodeEntries(data, framing)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for _, e := range entries {
		line, err := entryJSON(e)
		if err != nil {
			return err
		}
		line = append(line, '\n')
		if _, err := out.Write(line); err != nil {
			return err
		}
	}
	return nil
}
