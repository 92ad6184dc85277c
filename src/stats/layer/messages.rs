//! The gRPC messages of one body: the framing ([`FrameDecoder`]) and, for
//! a compressed message when it is asked for, its uncompressed length
//! (decompressed by [`compression`] as the receiver's
//! decoder would), so each whole message becomes a [`Payload`] or the
//! error the receiver reports for it.

use bytes::Bytes;
use http::HeaderMap;

use super::headers::{GRPC_ENCODING, find};
use crate::stats::compression::{DecompressError, Encoding, UnsupportedEncoding, uncompressed_len};
use crate::stats::event::{CompressionError, Direction, Payload, RpcError};
use crate::stats::frame::{FrameDecoder, FrameError, FrameEvent, FrameHeader, PREFIX_LEN};

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
        match find(headers, &GRPC_ENCODING) {
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
    /// The bytes of the compressed message in progress that arrived in
    /// earlier chunks (shared slices of them, no copy), when `decompress`.
    pieces: Vec<Bytes>,
}

impl BodyMessages {
    /// A body whose messages may be `limit` bytes long (on the wire and
    /// decompressed), in `encoding`. With `decompress`, each compressed
    /// message is decompressed (without keeping the output) for its
    /// uncompressed length and the receiver's verdict on it; without, its
    /// payload carries no uncompressed length, and only what the headers
    /// decide (an encoding missing or not supported) is judged.
    pub(crate) fn new(limit: u32, encoding: BodyEncoding, decompress: bool) -> Self {
        Self {
            decoder: FrameDecoder::with_max_message_len(limit),
            encoding,
            decompress,
            pieces: Vec::new(),
        }
    }

    /// The framing decoder.
    pub(crate) fn decoder(&self) -> &FrameDecoder {
        &self.decoder
    }

    /// The one whole message `chunk` holds, when the body sits on a
    /// message boundary (the usual unary body): its payload, or the error
    /// the receiver reports for it. `None` for any other chunk (nothing
    /// consumed).
    #[inline(always)]
    pub(crate) fn single_message(
        &self,
        chunk: &Bytes,
        direction: Direction,
    ) -> Option<Result<Payload, RpcError>> {
        let header = self.decoder.single_message(chunk)?;
        Some(self.payload(header, &[&chunk[PREFIX_LEN..]], direction))
    }

    /// Consumes a chunk that lies inside a message without completing it,
    /// if it does (keeping it when the message is compressed); `false`
    /// (nothing consumed) otherwise.
    #[inline(always)]
    pub(crate) fn skip_inside_message(&mut self, chunk: &Bytes) -> bool {
        match self.decoder.skip_inside_message(chunk.len()) {
            Some(header) => {
                if header.compressed && self.decompress {
                    self.pieces.push(chunk.clone());
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
        mut on_message: impl FnMut(Result<Payload, RpcError>),
    ) -> Result<(), FrameError> {
        let limit = self.decoder.max_message_len();
        let Self {
            decoder,
            encoding,
            decompress,
            pieces,
        } = self;
        let decompress = *decompress;
        decoder.push_with_bodies(chunk, |event| match event {
            FrameEvent::Body(header, range) => {
                if header.compressed && decompress {
                    pieces.push(chunk.slice(range));
                }
            }
            FrameEvent::Message(header) => {
                let payload = payload_of(encoding, decompress, header, pieces, limit, direction);
                // Keeps the allocation for the next compressed message.
                pieces.clear();
                on_message(payload);
            }
        })
    }

    fn payload<P: AsRef<[u8]>>(
        &self,
        header: FrameHeader,
        message: &[P],
        direction: Direction,
    ) -> Result<Payload, RpcError> {
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
) -> Result<Payload, RpcError> {
    if !header.compressed {
        return Ok(Payload::new(Some(header.length), header.length, false));
    }
    if !decompress && matches!(encoding, BodyEncoding::Known(_)) {
        return Ok(Payload::compressed_unmeasured(header.length));
    }
    compressed_payload(encoding, header, message, limit, direction)
}

#[cold]
fn compressed_payload<P: AsRef<[u8]>>(
    encoding: &BodyEncoding,
    header: FrameHeader,
    message: &[P],
    limit: u32,
    direction: Direction,
) -> Result<Payload, RpcError> {
    let error = match encoding {
        BodyEncoding::Known(encoding) => match uncompressed_len(*encoding, message, limit) {
            Ok(length) => return Ok(Payload::new(Some(length), header.length, true)),
            Err(DecompressError::TooLarge { limit }) => CompressionError::TooLarge { limit },
            Err(DecompressError::Corrupt(error)) => CompressionError::Corrupt {
                message: error.to_string(),
            },
        },
        BodyEncoding::Identity => CompressionError::MissingEncoding,
        BodyEncoding::Unsupported(unsupported) => CompressionError::UnsupportedEncoding {
            encoding: unsupported.name().to_owned(),
        },
    };
    Err(RpcError::Compression { direction, error })
}
