//! The direct encoding against prost's encoding of the same
//! `GrpcLogEntry`, built as the log built it before (owned metadata, then
//! grpc-go's truncation): byte for byte.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use prost::Message as _;

use super::*;
use crate::binlog::address::ip_address;
use crate::binlog::proto::grpc_log_entry::Payload;
use crate::binlog::proto::{
    ClientHeader, GrpcLogEntry, Message, Metadata, MetadataEntry, ServerHeader, Trailer,
};
use crate::wire::base64::base64_decode;
use crate::wire::keys::{GRPC_TRACE_BIN, binlog_omits, is_binary};

/// The metadata as the log built it before: owned entries, then cut.
fn owned_metadata(headers: &HeaderMap, limit: u64) -> (Metadata, bool) {
    let mut entry: Vec<MetadataEntry> = headers
        .iter()
        .filter(|(key, _)| !binlog_omits(key.as_str()))
        .map(|(key, value)| MetadataEntry {
            key: key.as_str().to_owned(),
            value: match is_binary(key.as_str().as_bytes()) {
                true => base64_decode(value.as_bytes())
                    .map(Bytes::from)
                    .unwrap_or_else(|| Bytes::copy_from_slice(value.as_bytes())),
                false => Bytes::copy_from_slice(value.as_bytes()),
            },
        })
        .collect();
    if limit == u64::MAX {
        return (Metadata { entry }, false);
    }
    let mut budget = limit;
    let mut index = 0;
    while let Some(item) = entry.get(index) {
        if item.key != GRPC_TRACE_BIN {
            let len = (item.key.len() + item.value.len()) as u64;
            if len > budget {
                break;
            }
            budget -= len;
        }
        index += 1;
    }
    let truncated = index < entry.len();
    entry.truncate(index);
    (Metadata { entry }, truncated)
}

fn head(kind: EventType, peer: Option<&Address>, timestamp: SystemTime) -> EntryHead<'_> {
    EntryHead {
        timestamp,
        call_id: 77,
        sequence: 3,
        kind,
        logger: Logger::Server,
        truncated: false,
        peer,
    }
}

/// prost's framed encoding of `head` with `payload`.
fn prost_framed(head: &EntryHead<'_>, payload: Option<Payload>, framing: Framing) -> Vec<u8> {
    let entry = GrpcLogEntry {
        timestamp: Some(head.timestamp.into()),
        call_id: head.call_id,
        sequence_id_within_call: head.sequence,
        r#type: head.kind as i32,
        logger: head.logger as i32,
        payload,
        payload_truncated: head.truncated,
        peer: head.peer.cloned(),
    };
    let mut out = Vec::new();
    framing.encode_into(&entry, &mut out).unwrap();
    out
}

fn ours(head: &EntryHead<'_>, payload: &EntryPayload<'_>, framing: Framing) -> Vec<u8> {
    let mut out = b"before".to_vec();
    encode_framed(head, payload, framing, &mut out).unwrap();
    out.split_off(6)
}

fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (key, value) in pairs {
        map.append(
            HeaderName::from_bytes(key.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    map
}

fn check_headers(map: &HeaderMap, limit: u64, framing: Framing, peer: Option<&Address>) {
    let (owned, truncated) = owned_metadata(map, limit);
    let logged = LoggedMetadata::new(map, limit);
    assert_eq!(logged.truncated(), truncated);
    let timestamp = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    let mut head = head(EventType::ClientHeader, peer, timestamp);
    head.truncated = truncated;
    let timeout = Some(prost_types::Duration {
        seconds: 0,
        nanos: 99_000_000,
    });
    let client = EntryPayload::ClientHeader {
        metadata: logged,
        method: "/pkg.Service/Method",
        authority: "localhost:50051",
        timeout,
    };
    let expected = Payload::ClientHeader(ClientHeader {
        metadata: Some(owned.clone()),
        method_name: "/pkg.Service/Method".into(),
        authority: "localhost:50051".into(),
        timeout,
    });
    assert_eq!(
        ours(&head, &client, framing),
        prost_framed(&head, Some(expected), framing)
    );
    head.kind = EventType::ServerHeader;
    let server = EntryPayload::ServerHeader { metadata: logged };
    let expected = Payload::ServerHeader(ServerHeader {
        metadata: Some(owned),
    });
    assert_eq!(
        ours(&head, &server, framing),
        prost_framed(&head, Some(expected), framing)
    );
}

#[test]
fn headers_encode_as_prost_encodes_them() {
    let peer = ip_address("127.0.0.1:4242".parse::<SocketAddr>().unwrap());
    let map = headers(&[
        ("x-user", b"alice"),
        ("lb-token", b"dropped"),
        ("content-type", b"application/grpc"),
        ("grpc-timeout", b"1S"),
        ("grpc-trace-bin", b"AAEC"),
        ("x-raw-bin", b"Zm9v"),
        ("x-bad-bin", b"not base64!"),
        ("x-empty", b""),
        ("x-user", b"bob"),
    ]);
    for framing in [Framing::Grpc, Framing::Varint] {
        for limit in [u64::MAX, 0, 5, 10, 12, 20, 1000] {
            check_headers(&map, limit, framing, Some(&peer));
            check_headers(&map, limit, framing, None);
        }
        check_headers(&HeaderMap::new(), u64::MAX, framing, None);
    }
}

#[test]
fn messages_trailers_and_empty_payloads_encode_as_prost_encodes_them() {
    let pieces = [
        Bytes::from_static(b"hel"),
        Bytes::new(),
        Bytes::from_static(b"lo world"),
    ];
    let data = MessageData::new(&pieces);
    let before_epoch = SystemTime::UNIX_EPOCH - Duration::new(5, 1);
    for framing in [Framing::Grpc, Framing::Varint] {
        for timestamp in [SystemTime::now(), SystemTime::UNIX_EPOCH, before_epoch] {
            for kept in [0, 1, 3, 4, 11] {
                let mut head = head(EventType::ClientMessage, None, timestamp);
                head.truncated = kept < 11;
                let payload = EntryPayload::Message {
                    length: 11,
                    data,
                    kept,
                };
                let expected = Payload::Message(Message {
                    length: 11,
                    data: data.prefix(kept),
                });
                assert_eq!(
                    ours(&head, &payload, framing),
                    prost_framed(&head, Some(expected), framing)
                );
            }
            let head = head(EventType::Cancel, None, timestamp);
            assert_eq!(
                ours(&head, &EntryPayload::None, framing),
                prost_framed(&head, None, framing)
            );
        }
        let metadata = Metadata {
            entry: vec![MetadataEntry {
                key: "x-trailer".into(),
                value: Bytes::from_static(b"v"),
            }],
        };
        for (metadata, code, message, details) in [
            (metadata.clone(), 3, "bad request", &b"\x08\x03"[..]),
            (Metadata::default(), 0, "", &b""[..]),
        ] {
            let head = head(EventType::ServerTrailer, None, SystemTime::now());
            let encoded = metadata.encode_to_vec();
            let payload = EntryPayload::Trailer {
                metadata: &encoded,
                code,
                message,
                details,
            };
            let expected = Payload::Trailer(Trailer {
                metadata: Some(metadata),
                status_code: code,
                status_message: message.into(),
                status_details: Bytes::copy_from_slice(details),
            });
            assert_eq!(
                ours(&head, &payload, framing),
                prost_framed(&head, Some(expected), framing)
            );
        }
    }
}

/// A header key: lowercase letters and dashes, sometimes binary, sometimes
/// one gRPC leaves out.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z-]{0,8}",
        "[a-z]{1,6}-bin",
        Just("grpc-trace-bin".to_owned()),
        Just("grpc-status".to_owned()),
        Just("user-agent".to_owned()),
    ]
}

/// A header value: printable bytes, often valid base64.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(0x20u8..0x7f, 0..12),
        "[A-Za-z0-9+/]{0,12}={0,2}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn any_headers_encode_as_prost_encodes_them(
        pairs in proptest::collection::vec((key(), value()), 0..8),
        limit in prop_oneof![Just(u64::MAX), 0u64..64],
    ) {
        let pairs: Vec<(&str, &[u8])> =
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        let map = headers(&pairs);
        check_headers(&map, limit, Framing::Grpc, None);
        check_headers(&map, limit, Framing::Varint, None);
    }
}
