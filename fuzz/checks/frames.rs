//! The gRPC frame decoder (`stats::frame::FrameDecoder`), fed the same
//! bytes in arbitrary chunks through each entry point the layer uses
//! (`push`, `push_with_bodies`, and the one-message and inside-a-message
//! fast paths), checked against a reference reading of the whole stream
//! and against tonic's own decoder (`Streaming`) reading the same chunks.

use tonic::Code;
use tonic::codec::Streaming;
use tonic_hotpath::internals::{self, FrameStep};
use tonic_hotpath::stats::frame::{FrameDecoder, FrameError, FrameHeader};

use super::body::{Chunks, now};
use super::compression_support::LenDecoder;
use super::input::{Input, split};

const PREFIX_LEN: usize = FrameHeader::PREFIX_LEN;

/// Whole messages (header and bytes), and how the stream ended.
type Reading<'w> = (Vec<(FrameHeader, &'w [u8])>, Result<(), FrameError>);

/// The messages of `wire` (header and bytes) up to the first error, and
/// that error (a stream that ends inside a message is `Truncated`).
fn reference(wire: &[u8], limit: u32) -> Reading<'_> {
    let mut messages = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let Some(prefix) = wire[at..].first_chunk::<PREFIX_LEN>() else {
            let missing = (PREFIX_LEN - (wire.len() - at)) as u64;
            return (messages, Err(FrameError::Truncated { missing }));
        };
        let compressed = match prefix[0] {
            0 => false,
            1 => true,
            flag => return (messages, Err(FrameError::BadFlag(flag))),
        };
        let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        if length > limit {
            return (messages, Err(FrameError::TooLong { length, limit }));
        }
        let start = at + PREFIX_LEN;
        let end = start as u64 + u64::from(length);
        if end > wire.len() as u64 {
            let missing = end - wire.len() as u64;
            return (messages, Err(FrameError::Truncated { missing }));
        }
        messages.push((
            FrameHeader { compressed, length },
            &wire[start..end as usize],
        ));
        at = end as usize;
    }
    (messages, Ok(()))
}

/// Whether `wire` ends with a whole prefix, right after the messages
/// with `headers`.
fn wire_ends_with_prefix(wire: &[u8], headers: &[FrameHeader]) -> bool {
    let whole: u64 = headers.iter().map(FrameHeader::wire_length).sum();
    whole + PREFIX_LEN as u64 == wire.len() as u64
}

/// The flag byte of the prefix after the messages with `headers`.
fn failing_flag(wire: &[u8], headers: &[FrameHeader]) -> Option<u8> {
    let whole: u64 = headers.iter().map(FrameHeader::wire_length).sum();
    wire.get(usize::try_from(whole).ok()?).copied()
}

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let limit = match input.byte() % 4 {
        0 => 0,
        1 => 7,
        2 => 300,
        _ => 4 * 1024 * 1024,
    };
    let sizes = input.until(0xff).to_vec();
    let wire = input.rest();
    let chunks = split(wire, &sizes);
    let (messages, outcome) = reference(wire, limit);
    let headers: Vec<FrameHeader> = messages.iter().map(|(header, _)| *header).collect();

    // `push`, chunk by chunk: the same messages, then the same error.
    let mut decoder = FrameDecoder::with_max_message_len(limit);
    let mut seen = Vec::new();
    let mut failed = None;
    for chunk in &chunks {
        if let Err(error) = decoder.push(chunk, |header| seen.push(header)) {
            failed = Some(error);
            break;
        }
    }
    // A decoder that refused a prefix keeps refusing it.
    if let Some(error) = &failed {
        assert_eq!(decoder.push(b"\0\0\0\0\0", |_| {}).as_ref(), Err(error));
        assert_eq!(decoder.finish().as_ref(), Err(error));
    }
    let pushed = match failed {
        Some(error) => Err(error),
        None => decoder.finish(),
    };
    assert_eq!(seen, headers, "push: messages");
    assert_eq!(pushed, outcome, "push: outcome");

    // The layer's path: the fast paths first, `push_with_bodies` otherwise;
    // each message's bytes are exactly its bytes on the wire.
    let mut decoder = FrameDecoder::with_max_message_len(limit);
    let mut bodies: Vec<(FrameHeader, Vec<u8>)> = Vec::new();
    let mut open: Vec<u8> = Vec::new();
    let mut failed = None;
    for chunk in &chunks {
        if let Some(header) = internals::single_message(&decoder, chunk) {
            assert!(decoder.is_idle());
            bodies.push((header, chunk[PREFIX_LEN..].to_vec()));
            continue;
        }
        if internals::skip_inside_message(&mut decoder, chunk.len()).is_some() {
            open.extend_from_slice(chunk);
            continue;
        }
        let pushed = internals::push_with_bodies(&mut decoder, chunk, |step| match step {
            FrameStep::Body(_, range) => open.extend_from_slice(&chunk[range]),
            FrameStep::Message(header) => {
                assert_eq!(open.len(), header.length as usize, "body runs add up");
                bodies.push((header, std::mem::take(&mut open)));
            }
        });
        if let Err(error) = pushed {
            failed = Some(error);
            break;
        }
    }
    let pushed = match failed {
        Some(error) => Err(error),
        None => decoder.finish(),
    };
    let want: Vec<(FrameHeader, Vec<u8>)> = messages
        .iter()
        .map(|(header, bytes)| (*header, bytes.to_vec()))
        .collect();
    assert_eq!(bodies, want, "layer path: messages and their bytes");
    assert_eq!(pushed, outcome, "layer path: outcome");

    // tonic reads the same chunks as a request with no `grpc-encoding`:
    // the same messages up to the first compressed one (which it refuses,
    // INTERNAL), then the same verdict.
    let first_compressed = headers.iter().position(|header| header.compressed);
    let want_lengths: Vec<u32> = headers[..first_compressed.unwrap_or(headers.len())]
        .iter()
        .map(|header| header.length)
        .collect();
    // tonic checks for a cut message only by bytes left in its buffer at
    // the end of the body: a stream that ends right after a whole prefix
    // (no byte of the message yet) ends cleanly there (tonic 0.14.9
    // `codec/decode.rs` `poll_frame`), where this decoder, as grpc-go,
    // says the message was cut short.
    let cut_after_prefix = matches!(
        (&outcome, messages.last()),
        (Err(FrameError::Truncated { missing }), _)
            if wire.len() >= PREFIX_LEN
                && *missing == u64::from(u32::from_be_bytes(
                    wire[wire.len() - 4..].try_into().unwrap()
                ))
                && wire_ends_with_prefix(wire, &headers)
    );
    let want_code = match (first_compressed, &outcome) {
        (Some(_), _) => Some(Code::Internal),
        (None, Ok(())) => None,
        (None, Err(_)) if cut_after_prefix && failing_flag(wire, &headers) == Some(0) => None,
        // tonic reads the flag before the length: a compressed message
        // without `grpc-encoding` is refused first.
        (None, Err(FrameError::TooLong { .. })) if failing_flag(wire, &headers) == Some(1) => {
            Some(Code::Internal)
        }
        (None, Err(error)) => Some(error.code()),
    };
    let body = Chunks::new(chunks.iter().copied());
    let mut streaming = Streaming::new_request(LenDecoder, body, None, Some(limit as usize));
    let mut lengths = Vec::new();
    let code = loop {
        match now(streaming.message()) {
            Ok(Some(length)) => lengths.push(length),
            Ok(None) => break None,
            Err(status) => break Some(status.code()),
        }
    };
    assert_eq!(lengths, want_lengths, "tonic's messages");
    assert_eq!(code, want_code, "tonic's verdict");
}
