//! The framings: grpc-go's and grpc-java's bytes exactly, and every kind
//! of entry through a `FileSink` and back.

use std::io::{self, Cursor};

use prost::Message as _;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{FileSink, Framing, LogReader, Sink, read_log};

use crate::entries::{TempDir, every_kind, numbered};

#[test]
fn grpc_framing_is_a_4_byte_big_endian_length_then_the_entry() {
    for entry in every_kind(42) {
        let mut framed = Vec::new();
        let written = Framing::Grpc.write_entry(&entry, &mut framed).unwrap();
        let encoded = entry.encode_to_vec();
        let mut expected = (encoded.len() as u32).to_be_bytes().to_vec();
        expected.extend_from_slice(&encoded);
        assert_eq!(framed, expected);
        assert_eq!(written, framed.len());
        assert_eq!(Framing::Grpc.framed_len(&entry), framed.len());
    }
    // By hand: call_id 1 is field 2, varint 1.
    let mut framed = Vec::new();
    Framing::Grpc
        .write_entry(&numbered(1), &mut framed)
        .unwrap();
    assert_eq!(framed, [0, 0, 0, 2, 0x10, 0x01]);
}

#[test]
fn varint_framing_is_protobufs_delimited_encoding() {
    for entry in every_kind(42) {
        let mut framed = Vec::new();
        let written = Framing::Varint.write_entry(&entry, &mut framed).unwrap();
        assert_eq!(framed, entry.encode_length_delimited_to_vec());
        assert_eq!(written, framed.len());
        assert_eq!(Framing::Varint.framed_len(&entry), framed.len());
    }
    let mut framed = Vec::new();
    Framing::Varint
        .write_entry(&numbered(1), &mut framed)
        .unwrap();
    assert_eq!(framed, [2, 0x10, 0x01]);

    // A length of two varint bytes: 300 = 0b10_0101100.
    let entry = GrpcLogEntry {
        peer: Some(tonic_hotpath::binlog::proto::Address {
            address: "a".repeat(294),
            ..Default::default()
        }),
        ..GrpcLogEntry::default()
    };
    assert_eq!(entry.encoded_len(), 300);
    framed.clear();
    Framing::Varint.write_entry(&entry, &mut framed).unwrap();
    assert_eq!(framed[..2], [0xac, 0x02]);
    assert_eq!(Framing::Varint.prefix_len(300), 2);
}

#[test]
fn encode_into_appends() {
    let mut buf = b"head".to_vec();
    let appended = Framing::Grpc.encode_into(&numbered(1), &mut buf).unwrap();
    assert_eq!(appended, 6);
    assert_eq!(buf, b"head\0\0\0\x02\x10\x01");
}

#[test]
fn every_kind_round_trips_through_a_file_in_both_framings() {
    let dir = TempDir::new("round-trip");
    for framing in [Framing::Grpc, Framing::Varint] {
        let path = dir.path().join(format!("{framing:?}.bin"));
        let entries: Vec<GrpcLogEntry> = (1..=50).flat_map(every_kind).collect();
        let mut sink = FileSink::create(&path, framing).unwrap();
        for entry in &entries {
            sink.write(entry).unwrap();
        }
        sink.flush().unwrap();
        assert_eq!(read_log(&path, framing).unwrap(), entries, "{framing:?}");

        // And through an in-memory reader.
        let bytes = std::fs::read(&path).unwrap();
        let read: Vec<GrpcLogEntry> = LogReader::new(Cursor::new(bytes), framing)
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(read, entries);
    }
}

#[test]
fn a_boxed_sink_is_a_sink() {
    struct Count(usize);
    impl Sink for Count {
        fn write(&mut self, _: &GrpcLogEntry) -> io::Result<()> {
            self.0 += 1;
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::other("flushed"))
        }
    }

    fn write_two(sink: &mut impl Sink) -> io::Result<()> {
        sink.write(&numbered(1))?;
        sink.write(&numbered(2))
    }

    let mut sink: Box<dyn Sink> = Box::new(Count(0));
    write_two(&mut sink).unwrap();
    assert_eq!(sink.flush().unwrap_err().to_string(), "flushed");
}
