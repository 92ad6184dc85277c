//! Entries for the tests: one of every kind, and a temp dir.

use std::path::{Path, PathBuf};

use prost_types::{Duration, Timestamp};
use tonic_hotpath::binlog::proto::grpc_log_entry::{EventType, Logger, Payload};
use tonic_hotpath::binlog::proto::{
    Address, ClientHeader, GrpcLogEntry, Message, Metadata, MetadataEntry, ServerHeader, Trailer,
    address,
};

fn metadata(pairs: &[(&str, &'static [u8])]) -> Option<Metadata> {
    Some(Metadata {
        entry: pairs
            .iter()
            .map(|&(key, value)| MetadataEntry {
                key: key.to_owned(),
                value: value.into(),
            })
            .collect(),
    })
}

/// One entry of every event type, as a call logs them: client header,
/// server header, a message each way, half close, trailer, cancel.
pub fn every_kind(call_id: u64) -> Vec<GrpcLogEntry> {
    let base = |sequence: u64, kind: EventType, payload: Option<Payload>| GrpcLogEntry {
        timestamp: Some(Timestamp {
            seconds: 1_700_000_000,
            nanos: 123_456_789,
        }),
        call_id,
        sequence_id_within_call: sequence,
        r#type: kind as i32,
        logger: Logger::Server as i32,
        payload_truncated: false,
        peer: None,
        payload,
    };
    let client_header = GrpcLogEntry {
        peer: Some(Address {
            r#type: address::Type::Ipv6 as i32,
            address: "::1".to_owned(),
            ip_port: 50051,
        }),
        ..base(
            1,
            EventType::ClientHeader,
            Some(Payload::ClientHeader(ClientHeader {
                metadata: metadata(&[("x-org-id", b"acme"), ("trace-bin", b"\x00\xff\x10")]),
                method_name: "/hotpath.echo.Echo/UnaryEcho".to_owned(),
                authority: "localhost:50051".to_owned(),
                timeout: Some(Duration {
                    seconds: 3,
                    nanos: 500,
                }),
            })),
        )
    };
    let message = |data: &'static [u8]| {
        Some(Payload::Message(Message {
            length: data.len() as u32,
            data: data.into(),
        }))
    };
    vec![
        client_header,
        base(
            2,
            EventType::ServerHeader,
            Some(Payload::ServerHeader(ServerHeader {
                metadata: metadata(&[("server", b"tonic")]),
            })),
        ),
        base(3, EventType::ClientMessage, message(b"\x0a\x05hello")),
        GrpcLogEntry {
            payload_truncated: true,
            ..base(4, EventType::ServerMessage, message(b"\x0a\x03hel"))
        },
        base(5, EventType::ClientHalfClose, None),
        base(
            6,
            EventType::ServerTrailer,
            Some(Payload::Trailer(Trailer {
                metadata: metadata(&[("grpc-status-details-bin", b"\x08\x05")]),
                status_code: 5,
                status_message: "not found: \u{1f50d}".to_owned(),
                status_details: b"\x08\x05\x12\x09not found"[..].into(),
            })),
        ),
        base(7, EventType::Cancel, None),
    ]
}

/// A small entry, told apart by its call id.
pub fn numbered(call_id: u64) -> GrpcLogEntry {
    GrpcLogEntry {
        call_id,
        ..GrpcLogEntry::default()
    }
}

/// A directory of its own under the temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tonic-hotpath-binlog-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
