//! The gRPC messages of one body: the framing ([`FrameDecoder`]) and, for
//! a compressed message when it is asked for, its uncompressed length
//! (decompressed by [`compression`] as the receiver's
//! decoder would), so each whole message becomes a [`Payload`] or the
//! error the receiver reports for it.

use bytes::Bytes;
use http::HeaderMap;

use super::headers::GRPC_ENCODING;
use super::pieces::Pieces;
use crate::stats::MessageData;
use crate::stats::compression::{
    DecompressError, Encoding, UnsupportedEncoding, decompress, uncompressed_len,
};
use crate::stats::event::{CompressionError, Direction, Payload, RpcError};
use crate::stats::frame::{FrameDecoder, FrameError, FrameEvent, FrameHeader};
use crate::wire::headers::first_value;

/// How a body's compressed messages are encoded (its `grpc-encoding`).
#[derive(Debug, Clone, Default)]
pub(crate) enum BodyEncoding {
    /// None, or `identity`: a message with its compressed flag set is an
    /// error.
    #[default]
    Identity,
    /// One this crate decompresses.
    Known(Encoding),
    /// One it does not know (nor does tonic).
    Unsupported(UnsupportedEncoding),
}

impl BodyEncoding {
    /// The encoding `headers` declare for the body they head.
    #[inline]
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        match first_value(headers, &GRPC_ENCODING) {
            None => BodyEncoding::Identity,
            Some(value) => Self::named(value.as_bytes()),
        }
    }

    #[cold]
    fn named(value: &[u8]) -> Self {
        match Encoding::from_header(value) {
            Ok(None) => BodyEncoding::Identity,
            Ok(Some(encoding)) => BodyEncoding::Known(encoding),
            Err(unsupported) => BodyEncoding::Unsupported(unsupported),
        }
    }
}

/// One body's messages, read as they pass.
#[derive(Debug, Default)]
pub(crate) struct BodyMessages {
    decoder: FrameDecoder,
    encoding: BodyEncoding,
    /// Whether compressed messages are decompressed (see
    /// [`BodyMessages::new`]); if not, a compressed message's payload has
    /// no uncompressed length and its bytes are not kept.
    decompress: bool,
    /// Whether each message's bytes are kept for its payload event
    /// ([`Payload::data`]): a handler asked for them.
    keep: bool,
    /// The bytes of the message in progress that arrived in earlier
    /// chunks (shared slices of them, short ones copied together), when
    /// they are kept or the message is compressed and decompressed.
    pieces: Pieces,
}

impl BodyMessages {
    /// A body whose messages may be `limit` bytes long (on the wire and
    /// decompressed), in `encoding`. With `decompress`, each compressed
    /// message is decompressed (without keeping the output) for its
    /// uncompressed length and the receiver's verdict on it; without, its
    /// payload carries no uncompressed length, and only what the headers
    /// decide (an encoding missing or not supported) is judged. With
    /// `keep`, each payload carries the message's bytes (decompressed,
    /// which implies `decompress`).
    pub(crate) fn new(limit: u32, encoding: BodyEncoding, decompress: bool, keep: bool) -> Self {
        Self {
            decoder: FrameDecoder::with_max_message_len(limit),
            encoding,
            decompress: decompress || keep,
            keep,
            pieces: Pieces::default(),
        }
    }

    /// The framing decoder.
    pub(crate) fn decoder(&self) -> &FrameDecoder {
        &self.decoder
    }

    /// Calls `on_message` with the payload (or the receiver's error) of the
    /// one whole message `chunk` holds, when the body sits on a message
    /// boundary (the usual unary body); `false` for any other chunk
    /// (nothing consumed, `on_message` not called).
    #[inline(always)]
    pub(crate) fn single_message(
        &self,
        chunk: &Bytes,
        direction: Direction,
        on_message: impl FnOnce(Result<Payload<'_>, RpcError>),
    ) -> bool {
        let Some(header) = self.decoder.single_message(chunk) else {
            return false;
        };
        if self.keep {
            let body = [chunk.slice(FrameHeader::PREFIX_LEN..)];
            self.message(header, &body, direction, on_message);
        } else {
            on_message(self.payload(header, &[&chunk[FrameHeader::PREFIX_LEN..]], direction));
        }
        true
    }

    /// Consumes a chunk that lies inside a message without completing it,
    /// if it does (keeping it when the message's bytes are needed);
    /// `false` (nothing consumed) otherwise.
    #[inline(always)]
    pub(crate) fn skip_inside_message(&mut self, chunk: &Bytes) -> bool {
        match self.decoder.skip_inside_message(chunk.len()) {
            Some(header) => {
                if self.keep || (header.compressed && self.decompress) {
                    self.pieces.push(chunk);
                }
                true
            }
            None => false,
        }
    }

    /// Consumes any chunk, calling `on_message` with the payload (or the
    /// receiver's error) of each message it completes, in order.
    pub(crate) fn push(
        &mut self,
        chunk: &Bytes,
        direction: Direction,
        mut on_message: impl FnMut(Result<Payload<'_>, RpcError>),
    ) -> Result<(), FrameError> {
        let limit = self.decoder.max_message_len();
        let Self {
            decoder,
            encoding,
            decompress,
            keep,
            pieces,
        } = self;
        let (decompress, keep) = (*decompress, *keep);
        decoder.push_with_bodies(chunk, |event| match event {
            FrameEvent::Body(header, range) => {
                if keep || (header.compressed && decompress) {
                    pieces.push_part(chunk, range);
                }
            }
            FrameEvent::Message(header) => {
                let message = pieces.all();
                if keep {
                    message_of(encoding, header, message, limit, direction, &mut on_message);
                } else {
                    on_message(payload_of(
                        encoding, decompress, header, message, limit, direction,
                    ));
                }
                // Keeps the allocation for the next message.
                pieces.clear();
            }
        })
    }

    fn payload<P: AsRef<[u8]>>(
        &self,
        header: FrameHeader,
        message: &[P],
        direction: Direction,
    ) -> Result<Payload<'static>, RpcError> {
        let limit = self.decoder.max_message_len();
        payload_of(
            &self.encoding,
            self.decompress,
            header,
            message,
            limit,
            direction,
        )
    }

    /// A whole message whose bytes are kept: see [`message_of`].
    fn message(
        &self,
        header: FrameHeader,
        pieces: &[Bytes],
        direction: Direction,
        on_message: impl FnOnce(Result<Payload<'_>, RpcError>),
    ) {
        let limit = self.decoder.max_message_len();
        message_of(&self.encoding, header, pieces, limit, direction, on_message);
    }
}

/// The payload of a whole message whose bytes (after the prefix) are
/// `message`, or the error its receiver reports: tonic decompresses a
/// compressed message with the body's `grpc-encoding`, up to its decode
/// limit (`limit`: the receiver's, `u32::MAX` on the sender's side). Not
/// `decompress`ed, a compressed message in a known encoding is taken as
/// sent (`message` is then empty).
#[inline(always)]
fn payload_of<P: AsRef<[u8]>>(
    encoding: &BodyEncoding,
    decompress: bool,
    header: FrameHeader,
    message: &[P],
    limit: u32,
    direction: Direction,
) -> Result<Payload<'static>, RpcError> {
    if !header.compressed {
        return Ok(Payload::new(Some(header.length), header.length, false));
    }
    if !decompress && matches!(encoding, BodyEncoding::Known(_)) {
        return Ok(Payload::compressed_unmeasured(header.length));
    }
    compressed_payload(encoding, header, message, limit, direction, false)
        .map(|(payload, _)| payload)
}

/// Calls `on_message` with the payload of a whole message whose bytes are
/// `pieces`, carrying those bytes (decompressed, for a compressed one), or
/// with the error its receiver reports.
fn message_of(
    encoding: &BodyEncoding,
    header: FrameHeader,
    pieces: &[Bytes],
    limit: u32,
    direction: Direction,
    on_message: impl FnOnce(Result<Payload<'_>, RpcError>),
) {
    if !header.compressed {
        let payload = Payload::new(Some(header.length), header.length, false);
        return on_message(Ok(payload.with_data(Some(MessageData::new(pieces)))));
    }
    match compressed_payload(encoding, header, pieces, limit, direction, true) {
        Ok((payload, decompressed)) => {
            let decompressed = [Bytes::from(decompressed)];
            on_message(Ok(payload.with_data(Some(MessageData::new(&decompressed)))));
        }
        Err(error) => on_message(Err(error)),
    }
}

/// A compressed message's payload (and, with `keep`, its decompressed
/// bytes), or the error its receiver reports.
#[cold]
fn compressed_payload<P: AsRef<[u8]>>(
    encoding: &BodyEncoding,
    header: FrameHeader,
    message: &[P],
    limit: u32,
    direction: Direction,
    keep: bool,
) -> Result<(Payload<'static>, Vec<u8>), RpcError> {
    let error = match encoding {
        BodyEncoding::Known(encoding) => {
            let decoded = if keep {
                decompress(*encoding, message, limit).map(|bytes| {
                    let length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                    (length, bytes)
                })
            } else {
                uncompressed_len(*encoding, message, limit).map(|length| (length, Vec::new()))
            };
            match decoded {
                Ok((length, bytes)) => {
                    return Ok((Payload::new(Some(length), header.length, true), bytes));
                }
                Err(DecompressError::TooLarge { limit }) => CompressionError::TooLarge { limit },
                Err(DecompressError::Corrupt(error)) => CompressionError::Corrupt {
                    message: error.to_string(),
                },
            }
        }
        BodyEncoding::Identity => CompressionError::MissingEncoding,
        BodyEncoding::Unsupported(unsupported) => CompressionError::UnsupportedEncoding {
            encoding: unsupported.name().to_owned(),
        },
    };
    Err(RpcError::Compression { direction, error })
}
