//! Log entries encoded straight into their wire format, from what the RPC
//! borrows (its headers, its message's buffers): no `GrpcLogEntry`, no
//! copy but into the output. The bytes are exactly prost's encoding of
//! the same `GrpcLogEntry` (fields in tag order, default scalars left
//! out, present messages written even when empty); the tests hold them to
//! it.

use std::io;
use std::time::SystemTime;

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use super::metadata::LoggedMetadata;
use super::proto::Address;
use super::proto::grpc_log_entry::{EventType, Logger};
use super::sink::Framing;
use crate::stats::MessageData;

/// The fields every entry has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryHead<'a> {
    pub(crate) timestamp: SystemTime,
    pub(crate) call_id: u64,
    pub(crate) sequence: u64,
    pub(crate) kind: EventType,
    pub(crate) logger: Logger,
    pub(crate) truncated: bool,
    pub(crate) peer: Option<&'a Address>,
}

/// An entry's payload (its `oneof payload`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum EntryPayload<'a> {
    /// A half-close or a cancel.
    None,
    ClientHeader {
        metadata: LoggedMetadata<'a>,
        method: &'a str,
        authority: &'a str,
        timeout: Option<prost_types::Duration>,
    },
    ServerHeader {
        metadata: LoggedMetadata<'a>,
    },
    /// The message's first `kept` bytes, and its whole length.
    Message {
        length: u32,
        data: MessageData<'a>,
        kept: usize,
    },
    /// A trailer whose metadata was encoded when the trailers were seen
    /// (the fields of a `Metadata` message).
    Trailer {
        metadata: &'a [u8],
        code: u32,
        message: &'a str,
        details: &'a [u8],
    },
}

/// Appends the entry, framed with `framing`, to `buf`. With
/// [`Framing::Grpc`] an entry of 4 GiB or more is an
/// [`InvalidInput`](io::ErrorKind::InvalidInput) error, and nothing is
/// appended.
pub(crate) fn encode_framed(
    head: &EntryHead<'_>,
    payload: &EntryPayload<'_>,
    framing: Framing,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let timestamp = prost_types::Timestamp::from(head.timestamp);
    let payload_len = payload_len(payload);
    let entry_len = message_field_len(1, timestamp_len(&timestamp))
        + uint_field_len(2, head.call_id)
        + uint_field_len(3, head.sequence)
        + uint_field_len(4, head.kind as u64)
        + uint_field_len(5, head.logger as u64)
        + payload_len.map_or(0, |(tag, len)| message_field_len(tag, len))
        + uint_field_len(10, u64::from(head.truncated))
        + head
            .peer
            .map_or(0, |peer| message_field_len(11, address_len(peer)));
    buf.reserve(framing.prefix_len(entry_len) + entry_len);
    framing.write_prefix(entry_len, buf)?;
    encode_message_key(1, timestamp_len(&timestamp), buf);
    encode_int_field(1, timestamp.seconds as u64, buf);
    encode_int_field(2, i64::from(timestamp.nanos) as u64, buf);
    encode_int_field(2, head.call_id, buf);
    encode_int_field(3, head.sequence, buf);
    encode_int_field(4, head.kind as u64, buf);
    encode_int_field(5, head.logger as u64, buf);
    if let Some((tag, len)) = payload_len {
        encode_message_key(tag, len, buf);
        encode_payload(payload, buf);
    }
    encode_int_field(10, u64::from(head.truncated), buf);
    if let Some(peer) = head.peer {
        encode_message_key(11, address_len(peer), buf);
        encode_int_field(1, peer.r#type as u64, buf);
        encode_bytes_field(2, peer.address.as_bytes(), buf);
        encode_int_field(3, u64::from(peer.ip_port), buf);
    }
    Ok(())
}

/// The payload's tag and encoded length; `None` for no payload.
fn payload_len(payload: &EntryPayload<'_>) -> Option<(u32, usize)> {
    Some(match payload {
        EntryPayload::None => return None,
        EntryPayload::ClientHeader {
            metadata,
            method,
            authority,
            timeout,
        } => (
            6,
            message_field_len(1, metadata.encoded_len())
                + bytes_field_len(2, method.len())
                + bytes_field_len(3, authority.len())
                + timeout.as_ref().map_or(0, |timeout| {
                    message_field_len(4, duration_len(timeout.seconds, timeout.nanos))
                }),
        ),
        EntryPayload::ServerHeader { metadata } => {
            (7, message_field_len(1, metadata.encoded_len()))
        }
        EntryPayload::Message { length, kept, .. } => (
            8,
            uint_field_len(1, u64::from(*length)) + bytes_field_len(2, *kept),
        ),
        EntryPayload::Trailer {
            metadata,
            code,
            message,
            details,
        } => (
            9,
            message_field_len(1, metadata.len())
                + uint_field_len(2, u64::from(*code))
                + bytes_field_len(3, message.len())
                + bytes_field_len(4, details.len()),
        ),
    })
}

fn encode_payload(payload: &EntryPayload<'_>, buf: &mut Vec<u8>) {
    match payload {
        EntryPayload::None => {}
        EntryPayload::ClientHeader {
            metadata,
            method,
            authority,
            timeout,
        } => {
            encode_message_key(1, metadata.encoded_len(), buf);
            metadata.encode(buf);
            encode_bytes_field(2, method.as_bytes(), buf);
            encode_bytes_field(3, authority.as_bytes(), buf);
            if let Some(timeout) = timeout {
                encode_message_key(4, duration_len(timeout.seconds, timeout.nanos), buf);
                encode_int_field(1, timeout.seconds as u64, buf);
                encode_int_field(2, i64::from(timeout.nanos) as u64, buf);
            }
        }
        EntryPayload::ServerHeader { metadata } => {
            encode_message_key(1, metadata.encoded_len(), buf);
            metadata.encode(buf);
        }
        EntryPayload::Message { length, data, kept } => {
            encode_int_field(1, u64::from(*length), buf);
            if *kept > 0 {
                encode_message_key(2, *kept, buf);
                let mut room = *kept;
                for piece in data.pieces() {
                    let take = piece.len().min(room);
                    buf.extend_from_slice(&piece[..take]);
                    room -= take;
                }
            }
        }
        EntryPayload::Trailer {
            metadata,
            code,
            message,
            details,
        } => {
            encode_message_key(1, metadata.len(), buf);
            buf.extend_from_slice(metadata);
            encode_int_field(2, u64::from(*code), buf);
            encode_bytes_field(3, message.as_bytes(), buf);
            encode_bytes_field(4, details, buf);
        }
    }
}

/// The encoded length of a `Timestamp`.
fn timestamp_len(timestamp: &prost_types::Timestamp) -> usize {
    duration_len(timestamp.seconds, timestamp.nanos)
}

/// The encoded length of a `Timestamp` or `Duration`: seconds (`int64`,
/// tag 1) and nanos (`int32`, tag 2).
fn duration_len(seconds: i64, nanos: i32) -> usize {
    uint_field_len(1, seconds as u64) + uint_field_len(2, i64::from(nanos) as u64)
}

fn address_len(peer: &Address) -> usize {
    uint_field_len(1, peer.r#type as u64)
        + bytes_field_len(2, peer.address.len())
        + uint_field_len(3, u64::from(peer.ip_port))
}

/// The encoded length of a varint field (`uint64`, `int64` as two's
/// complement, `int32` sign-extended, `uint32`, `bool`, enums), nothing
/// for its default 0.
fn uint_field_len(tag: u32, value: u64) -> usize {
    match value {
        0 => 0,
        _ => key_len(tag) + encoded_len_varint(value),
    }
}

/// Appends a varint field unless it is 0 (proto3 leaves defaults out).
fn encode_int_field(tag: u32, value: u64, buf: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::Varint, buf);
        encode_varint(value, buf);
    }
}

/// The encoded length of a `string` or `bytes` field of `len` bytes,
/// nothing when empty.
pub(crate) fn bytes_field_len(tag: u32, len: usize) -> usize {
    match len {
        0 => 0,
        _ => message_field_len(tag, len),
    }
}

/// Appends a `string` or `bytes` field unless it is empty.
pub(crate) fn encode_bytes_field(tag: u32, value: &[u8], buf: &mut Vec<u8>) {
    if !value.is_empty() {
        encode_message_key(tag, value.len(), buf);
        buf.extend_from_slice(value);
    }
}

/// The encoded length of a present message field whose content is `len`
/// bytes (written even when empty).
pub(crate) fn message_field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// Appends the key and length of a length-delimited field whose content
/// (`len` bytes) follows.
pub(crate) fn encode_message_key(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

#[cfg(test)]
mod tests;
