//! `LogReader` on hostile input: huge declared lengths (refused, never
//! allocated), truncation, bad varints, undecodable entries; and never a
//! panic on any bytes.

use std::io::{self, Cursor, ErrorKind, Read};

use proptest::prelude::*;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{Framing, LogReader};

use crate::entries::{every_kind, numbered};
use support::alloc_count::net_bytes_so_far;

fn framed(framing: Framing, entries: &[GrpcLogEntry]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in entries {
        framing.write_entry(entry, &mut bytes).unwrap();
    }
    bytes
}

/// Every item the reader yields for `bytes`: entries, then at most one
/// error.
fn read_all(bytes: &[u8], framing: Framing) -> Vec<io::Result<GrpcLogEntry>> {
    LogReader::new(Cursor::new(bytes), framing).collect()
}

/// The error that ends `items`, after `good` entries.
fn error_after(items: Vec<io::Result<GrpcLogEntry>>, good: usize) -> io::Error {
    assert_eq!(items.len(), good + 1, "{items:?}");
    assert!(items[..good].iter().all(Result::is_ok));
    items.into_iter().last().unwrap().unwrap_err()
}

#[test]
fn a_huge_declared_length_is_an_error() {
    let good = framed(Framing::Grpc, &[numbered(1)]);
    let mut bytes = good.clone();
    bytes.extend_from_slice(&u32::MAX.to_be_bytes());
    bytes.extend_from_slice(b"tiny");
    let error = error_after(read_all(&bytes, Framing::Grpc), 1);
    assert_eq!(error.kind(), ErrorKind::InvalidData);
    assert!(error.to_string().contains("at byte 6"), "{error}");

    // A varint of 2^63.
    let mut bytes = framed(Framing::Varint, &[numbered(1)]);
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    let error = error_after(read_all(&bytes, Framing::Varint), 1);
    assert_eq!(error.kind(), ErrorKind::InvalidData);
}

#[test]
fn the_maximum_entry_length_is_the_callers() {
    let entry = every_kind(1).remove(0);
    let bytes = framed(Framing::Varint, std::slice::from_ref(&entry));
    let len = prost::Message::encoded_len(&entry);
    let at_max = LogReader::new(Cursor::new(&bytes), Framing::Varint).with_max_entry_len(len);
    assert_eq!(at_max.map(Result::unwrap).collect::<Vec<_>>(), [entry]);
    let mut below =
        LogReader::new(Cursor::new(&bytes), Framing::Varint).with_max_entry_len(len - 1);
    assert_eq!(
        below.next().unwrap().unwrap_err().kind(),
        ErrorKind::InvalidData
    );
    assert!(below.next().is_none());
}

#[test]
fn a_declared_length_is_not_allocated_before_its_bytes_are_read() {
    // Declares 60 MiB (under the 64 MiB maximum) and holds 1 MiB.
    let declared = 60 << 20;
    assert!(declared < LogReader::DEFAULT_MAX_ENTRY_LEN);
    let mut bytes = (declared as u32).to_be_bytes().to_vec();
    bytes.resize(4 + (1 << 20), 0);

    let before = net_bytes_so_far();
    let mut reader = LogReader::new(Cursor::new(&bytes), Framing::Grpc);
    let error = reader.next().unwrap().unwrap_err();
    // The reader, still alive, holds its buffer.
    let held = net_bytes_so_far() - before;
    assert_eq!(error.kind(), ErrorKind::InvalidData);
    assert!(error.to_string().contains("ends after 1048576"), "{error}");
    assert!(held < 8 << 20, "the reader holds {held} bytes");
    assert!(reader.next().is_none());
}

#[test]
fn truncated_logs_are_errors_after_the_whole_entries() {
    for framing in [Framing::Grpc, Framing::Varint] {
        let entries = every_kind(9);
        let bytes = framed(framing, &entries);
        let last_start = bytes.len() - framing.framed_len(&entries[6]);
        // Inside the last entry's prefix, and inside its body.
        for cut in [last_start + 1, bytes.len() - 1] {
            if framing == Framing::Varint && cut == last_start + 1 {
                continue; // The last entry's varint prefix is 1 byte.
            }
            let error = error_after(read_all(&bytes[..cut], framing), 6);
            assert_eq!(error.kind(), ErrorKind::InvalidData, "{framing:?}");
        }
        // At an entry boundary: a clean end.
        let items = read_all(&bytes[..last_start], framing);
        assert_eq!(items.len(), 6);
        assert!(items.iter().all(Result::is_ok));
        assert!(read_all(&[], framing).is_empty());
    }
    // A varint prefix cut short.
    let error = error_after(read_all(&[0x80], Framing::Varint), 0);
    assert_eq!(error.kind(), ErrorKind::InvalidData);
}

#[test]
fn a_garbage_varint_is_an_error() {
    // Eleven continuation bytes, and a 10th byte above 1.
    for bytes in [vec![0xff; 11], [vec![0xff; 9], vec![0x02]].concat()] {
        let error = error_after(read_all(&bytes, Framing::Varint), 0);
        assert_eq!(error.kind(), ErrorKind::InvalidData);
        assert!(error.to_string().contains("varint"), "{error}");
    }
}

#[test]
fn an_undecodable_entry_is_an_error() {
    // Field 0 is no field; wire type 7 is no wire type.
    for body in [&[0x00, 0x00][..], &[0x0f]] {
        let mut bytes = framed(Framing::Grpc, &[numbered(1)]);
        bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
        bytes.extend_from_slice(body);
        let error = error_after(read_all(&bytes, Framing::Grpc), 1);
        assert_eq!(error.kind(), ErrorKind::InvalidData);
        assert!(error.to_string().contains("does not decode"), "{error}");
    }
}

#[test]
fn read_errors_pass_through() {
    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::new(ErrorKind::PermissionDenied, "no"))
        }
    }
    let mut reader = LogReader::new(Failing, Framing::Grpc);
    assert_eq!(
        reader.next().unwrap().unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert!(reader.next().is_none());
}

proptest! {
    #[test]
    fn the_reader_never_panics_on_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        varint in any::<bool>(),
    ) {
        let framing = if varint { Framing::Varint } else { Framing::Grpc };
        let reader = LogReader::new(Cursor::new(&bytes), framing).with_max_entry_len(1024);
        let items: Vec<_> = reader.collect();
        // Each item took at least one byte; only the last can be an error.
        prop_assert!(items.len() <= bytes.len());
        if let Some(position) = items.iter().position(Result::is_err) {
            prop_assert_eq!(position, items.len() - 1);
        }
    }

    #[test]
    fn entries_round_trip(
        ids in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..20),
        data in proptest::collection::vec(any::<u8>(), 0..300),
        varint in any::<bool>(),
    ) {
        let framing = if varint { Framing::Varint } else { Framing::Grpc };
        let entries: Vec<GrpcLogEntry> = ids
            .iter()
            .map(|&(call_id, sequence)| GrpcLogEntry {
                call_id,
                sequence_id_within_call: sequence,
                payload: Some(tonic_hotpath::binlog::proto::grpc_log_entry::Payload::Message(
                    tonic_hotpath::binlog::proto::Message {
                        length: data.len() as u32,
                        data: data.clone().into(),
                    },
                )),
                ..GrpcLogEntry::default()
            })
            .collect();
        let bytes = framed(framing, &entries);
        let read: Vec<GrpcLogEntry> = read_all(&bytes, framing).into_iter().map(Result::unwrap).collect();
        prop_assert_eq!(read, entries);
    }
}
