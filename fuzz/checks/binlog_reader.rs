//! Reading a binary log (`binlog::LogReader`), both framings, whatever the
//! bytes: the entries a reference reading of the whole input finds, then
//! at most one error and nothing after it; the offset is where the last
//! whole entry ends; what was read, framed again, reads back the same.
//! (Memory: the fuzz runs cap every allocation at 64 MiB, below the
//! lengths a prefix can declare.)

use std::io::Cursor;

use prost::Message;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{Framing, LogReader};

use super::input::Input;

/// The entries of `bytes` up to the first bad one, and where they end.
fn reference(bytes: &[u8], framing: Framing, max: usize) -> (Vec<GrpcLogEntry>, usize, bool) {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let (prefix, len) = match framing {
            Framing::Grpc => match rest.first_chunk::<4>() {
                Some(prefix) => (4, u64::from(u32::from_be_bytes(*prefix))),
                None => return (entries, at, true),
            },
            _ => {
                let mut cursor = rest;
                match prost::decode_length_delimiter(&mut cursor) {
                    Ok(len) => (rest.len() - cursor.len(), len as u64),
                    Err(_) => return (entries, at, true),
                }
            }
        };
        if len > max as u64 || len > (rest.len() - prefix) as u64 {
            return (entries, at, true);
        }
        let body = &rest[prefix..prefix + len as usize];
        match GrpcLogEntry::decode(body) {
            Ok(entry) => entries.push(entry),
            Err(_) => return (entries, at, true),
        }
        at += prefix + len as usize;
    }
    (entries, at, false)
}

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let choice = input.byte();
    let framing = if choice & 1 == 0 {
        Framing::Grpc
    } else {
        Framing::Varint
    };
    let max = match choice >> 1 & 3 {
        0 => 0,
        1 => 16,
        2 => 1024,
        _ => LogReader::DEFAULT_MAX_ENTRY_LEN,
    };
    let bytes = input.rest();
    let mut reader = LogReader::new(Cursor::new(bytes), framing).with_max_entry_len(max);
    let mut entries = Vec::new();
    let mut failed = false;
    for next in reader.by_ref() {
        match next {
            Ok(entry) => {
                assert!(!failed, "an entry after an error");
                entries.push(entry);
            }
            Err(error) => {
                assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
                assert!(!failed, "a second error");
                failed = true;
            }
        }
    }
    assert!(reader.next().is_none(), "nothing after the end");
    let (want, end, want_failed) = reference(bytes, framing, max);
    // A varint the reference's decoder refuses at the 10th byte, prost and
    // the reader judge alike; the reader also refuses lengths past u32.
    assert_eq!(entries, want, "{framing:?} max {max}");
    assert_eq!(failed, want_failed, "{framing:?} max {max}");
    assert_eq!(reader.offset(), end as u64);

    // Framed again and read back.
    let mut framed = Vec::new();
    for entry in &entries {
        let body = entry.encode_to_vec();
        match framing {
            Framing::Grpc => framed.extend_from_slice(&(body.len() as u32).to_be_bytes()),
            _ => prost::encode_length_delimiter(body.len(), &mut framed).unwrap(),
        }
        framed.extend_from_slice(&body);
    }
    let again: Vec<GrpcLogEntry> = LogReader::new(Cursor::new(&framed), framing)
        .map(|entry| entry.expect("a framed entry reads back"))
        .collect();
    assert_eq!(again, entries, "read back");
}
