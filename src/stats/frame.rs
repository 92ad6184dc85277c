//! Incremental decoder for gRPC's length-prefixed message framing.
//!
//! Every gRPC message on an HTTP/2 body is a 5-byte prefix (1 byte
//! compressed flag, 4 bytes big-endian length) followed by that many bytes.
//! Bodies arrive in arbitrary chunks: one chunk may hold many messages and
//! one message may span many chunks. [`FrameDecoder`] is a pure state
//! machine (no I/O, no buffering of message bytes) that reports each
//! message's header once the whole message has arrived (grpc-go emits a
//! payload event only for a message it received in full): a prefix that
//! promises more bytes than ever come is reported by
//! [`finish`](FrameDecoder::finish) as truncation, never as a message.

use std::fmt;

use tonic::Code;

/// Moved to [`FrameHeader::PREFIX_LEN`].
#[deprecated(note = "use `FrameHeader::PREFIX_LEN`")]
pub const PREFIX_LEN: usize = FrameHeader::PREFIX_LEN;

/// Moved to [`FrameDecoder::DEFAULT_MAX_MESSAGE_LEN`].
#[deprecated(note = "use `FrameDecoder::DEFAULT_MAX_MESSAGE_LEN`")]
pub const DEFAULT_MAX_MESSAGE_LEN: u32 = FrameDecoder::DEFAULT_MAX_MESSAGE_LEN;

/// One decoded message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Whether the compressed flag was set.
    pub compressed: bool,
    /// The message length on the wire, excluding the 5-byte prefix.
    pub length: u32,
}

impl FrameHeader {
    /// gRPC's message prefix: 1 flag byte + 4 length bytes.
    ///
    /// ```
    /// use tonic_hotpath::stats::frame::FrameHeader;
    ///
    /// let header = FrameHeader { compressed: false, length: 10 };
    /// assert_eq!(header.wire_length(), 10 + FrameHeader::PREFIX_LEN as u64);
    /// ```
    pub const PREFIX_LEN: usize = 5;

    /// The message length on the wire including the 5-byte prefix.
    pub fn wire_length(&self) -> u64 {
        u64::from(self.length) + FrameHeader::PREFIX_LEN as u64
    }
}

/// What [`FrameDecoder::push_with_bodies`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameEvent {
    /// Bytes of the message with this header: a range of the chunk.
    Body(FrameHeader, std::ops::Range<usize>),
    /// The message with this header is complete.
    Message(FrameHeader),
}

/// Malformed gRPC framing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The compressed-flag byte was neither 0 nor 1.
    BadFlag(u8),
    /// A message's declared length exceeds the configured limit.
    TooLong {
        /// The declared length.
        length: u32,
        /// The configured limit.
        limit: u32,
    },
    /// The stream ended inside a message prefix or a message body.
    Truncated {
        /// Bytes still missing to complete the current prefix and message.
        missing: u64,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadFlag(flag) => {
                write!(f, "grpc frame: compressed flag is {flag}, expected 0 or 1")
            }
            FrameError::TooLong { length, limit } => write!(
                f,
                "grpc frame: message length {length} exceeds the limit of {limit} bytes"
            ),
            FrameError::Truncated { missing } => write!(
                f,
                "grpc frame: stream ended inside a message ({missing} bytes missing)"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

impl FrameError {
    /// The status tonic's decoder gives a receiver for the same framing
    /// (tonic `codec/decode.rs`): a flag other than 0/1 and a stream that
    /// ends inside a message are `Internal`, a length over the limit is
    /// `OutOfRange` (when this decoder's limit is tonic's).
    pub fn code(&self) -> Code {
        match self {
            FrameError::BadFlag(_) | FrameError::Truncated { .. } => Code::Internal,
            FrameError::TooLong { .. } => Code::OutOfRange,
        }
    }
}

/// Incremental gRPC frame decoder.
///
/// Feed body chunks with [`push`](Self::push); each message is reported
/// once, when its last byte has arrived. Call [`finish`](Self::finish) at end of stream
/// to detect truncation. After an error the decoder stays failed and
/// reports the same error again.
///
/// ```
/// use tonic_hotpath::stats::frame::{FrameDecoder, FrameHeader};
///
/// let mut decoder = FrameDecoder::new();
/// let mut seen = Vec::new();
/// // Two messages ("hi" and "!"), split at awkward places.
/// let wire = [0, 0, 0, 0, 2, b'h', b'i', 0, 0, 0, 0, 1, b'!'];
/// decoder.push(&wire[..3], |h| seen.push(h)).unwrap();
/// decoder.push(&wire[3..6], |h| seen.push(h)).unwrap();
/// assert!(seen.is_empty(), "\"hi\" has not fully arrived yet");
/// decoder.push(&wire[6..], |h| seen.push(h)).unwrap();
/// decoder.finish().unwrap();
/// assert_eq!(seen, [
///     FrameHeader { compressed: false, length: 2 },
///     FrameHeader { compressed: false, length: 1 },
/// ]);
/// ```
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    prefix: [u8; FrameHeader::PREFIX_LEN],
    prefix_filled: u8,
    body_remaining: u32,
    /// The message whose bytes are arriving (while `body_remaining > 0`).
    current: FrameHeader,
    max_message_len: u32,
    failed: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// The default limit on one message's length: 4 MiB, tonic's default
    /// maximum receive size (and the stats layer's,
    /// [`CombinedLayer::max_message_len`](crate::stats::CombinedLayer::max_message_len)).
    pub const DEFAULT_MAX_MESSAGE_LEN: u32 = 4 * 1024 * 1024;

    /// A decoder with the default message limit
    /// ([`DEFAULT_MAX_MESSAGE_LEN`](Self::DEFAULT_MAX_MESSAGE_LEN)).
    pub fn new() -> Self {
        Self::with_max_message_len(Self::DEFAULT_MAX_MESSAGE_LEN)
    }

    /// A decoder that rejects messages longer than `limit` bytes.
    pub fn with_max_message_len(limit: u32) -> Self {
        Self {
            prefix: [0; FrameHeader::PREFIX_LEN],
            prefix_filled: 0,
            body_remaining: 0,
            current: FrameHeader {
                compressed: false,
                length: 0,
            },
            max_message_len: limit,
            failed: None,
        }
    }

    /// Consumes one body chunk, calling `on_message` for each message whose
    /// last byte is inside it, in order.
    pub fn push(
        &mut self,
        chunk: &[u8],
        on_message: impl FnMut(FrameHeader),
    ) -> Result<(), FrameError> {
        let mut on_message = on_message;
        self.push_with_bodies(chunk, |event| {
            if let FrameEvent::Message(header) = event {
                on_message(header);
            }
        })
    }

    /// As [`push`](Self::push), also reporting each run of message bytes in
    /// `chunk` ([`FrameEvent::Body`], before that message's
    /// [`FrameEvent::Message`]): what a caller keeps to decompress a
    /// compressed message.
    pub(crate) fn push_with_bodies(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(FrameEvent),
    ) -> Result<(), FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut at = 0;
        while at < chunk.len() {
            let rest = &chunk[at..];
            if self.body_remaining > 0 {
                let skip = rest.len().min(self.body_remaining as usize);
                // `skip` <= body_remaining, which is a u32.
                self.body_remaining -= skip as u32;
                on_event(FrameEvent::Body(self.current, at..at + skip));
                at += skip;
                if self.body_remaining == 0 {
                    on_event(FrameEvent::Message(self.current));
                }
                continue;
            }
            let prefix = match (
                self.prefix_filled,
                rest.first_chunk::<{ FrameHeader::PREFIX_LEN }>(),
            ) {
                // Fast path: a whole prefix in this chunk.
                (0, Some(prefix)) => {
                    at += FrameHeader::PREFIX_LEN;
                    *prefix
                }
                _ => {
                    let filled = usize::from(self.prefix_filled);
                    let take = rest.len().min(FrameHeader::PREFIX_LEN - filled);
                    self.prefix[filled..filled + take].copy_from_slice(&rest[..take]);
                    at += take;
                    self.prefix_filled += take as u8;
                    if usize::from(self.prefix_filled) < FrameHeader::PREFIX_LEN {
                        continue;
                    }
                    self.prefix_filled = 0;
                    self.prefix
                }
            };
            let header = self.parse_prefix(prefix).inspect_err(|error| {
                self.failed = Some(error.clone());
            })?;
            if header.length == 0 {
                on_event(FrameEvent::Message(header));
            } else {
                self.current = header;
                self.body_remaining = header.length;
            }
        }
        Ok(())
    }

    /// The longest message this decoder accepts.
    pub(crate) fn max_message_len(&self) -> u32 {
        self.max_message_len
    }

    /// The header of the one whole message `chunk` holds, when the decoder
    /// sits on a message boundary (the usual unary body): the decoder stays
    /// on the boundary, so nothing changes. `None` (nothing consumed) for
    /// any other chunk, including a malformed prefix: [`push`](Self::push)
    /// then reports it.
    #[inline]
    pub(crate) fn single_message(&self, chunk: &[u8]) -> Option<FrameHeader> {
        if self.prefix_filled != 0 || self.body_remaining != 0 || self.failed.is_some() {
            return None;
        }
        let (prefix, message) = chunk.split_first_chunk::<{ FrameHeader::PREFIX_LEN }>()?;
        let header = self.parse_prefix(*prefix).ok()?;
        (header.length as usize == message.len()).then_some(header)
    }

    /// Consumes a chunk that lies inside the current message's bytes and
    /// does not complete it (nothing to report), if it does, and returns
    /// that message's header; `None` (nothing consumed) otherwise.
    #[inline]
    pub(crate) fn skip_inside_message(&mut self, len: usize) -> Option<FrameHeader> {
        let inside = self.prefix_filled == 0
            && self.failed.is_none()
            && usize::try_from(self.body_remaining).is_ok_and(|remaining| remaining > len);
        if !inside {
            return None;
        }
        // `len` <= body_remaining, which is a u32.
        self.body_remaining -= len as u32;
        Some(self.current)
    }

    #[inline]
    fn parse_prefix(
        &self,
        prefix: [u8; FrameHeader::PREFIX_LEN],
    ) -> Result<FrameHeader, FrameError> {
        let [flag, a, b, c, d] = prefix;
        let compressed = match flag {
            0 => false,
            1 => true,
            flag => return Err(FrameError::BadFlag(flag)),
        };
        let length = u32::from_be_bytes([a, b, c, d]);
        if length > self.max_message_len {
            return Err(FrameError::TooLong {
                length,
                limit: self.max_message_len,
            });
        }
        Ok(FrameHeader { compressed, length })
    }

    /// Whether the decoder sits on a message boundary (nothing pending).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.prefix_filled == 0 && self.body_remaining == 0 && self.failed.is_none()
    }

    /// Checks the stream ended on a message boundary.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let missing = if self.prefix_filled > 0 {
            (FrameHeader::PREFIX_LEN - usize::from(self.prefix_filled)) as u64
        } else {
            u64::from(self.body_remaining)
        };
        if missing == 0 {
            Ok(())
        } else {
            Err(FrameError::Truncated { missing })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `push` reports for `chunk`, and the decoder after it.
    fn pushed(decoder: &FrameDecoder, chunk: &[u8]) -> (Vec<FrameHeader>, FrameDecoder) {
        let mut decoder = decoder.clone();
        let mut seen = Vec::new();
        let _ = decoder.push(chunk, |header| seen.push(header));
        (seen, decoder)
    }

    /// The decoder's position (`current` only matters inside a message).
    fn state(decoder: &FrameDecoder) -> (u8, u32, Option<FrameHeader>, Option<FrameError>) {
        (
            decoder.prefix_filled,
            decoder.body_remaining,
            (decoder.body_remaining > 0).then_some(decoder.current),
            decoder.failed.clone(),
        )
    }

    #[test]
    fn the_fast_paths_agree_with_push() {
        let message = [1u8, 0, 0, 0, 3, b'a', b'b', b'c'];
        let chunks: [&[u8]; 9] = [
            &message,
            &message[..7],
            &message[7..],
            &message[..4],
            &[0, 0, 0, 0, 0],
            &[0, 0, 0, 0, 0, 0],
            &[2, 0, 0, 0, 0],
            &[0, 0, 0, 0, 9, 1, 2],
            &[],
        ];
        let mut starts = vec![FrameDecoder::new(), FrameDecoder::with_max_message_len(2)];
        for chunk in chunks {
            starts.push(pushed(&FrameDecoder::new(), chunk).1);
        }
        for start in &starts {
            for chunk in chunks {
                let (seen, after) = pushed(start, chunk);
                if let Some(header) = start.single_message(chunk) {
                    assert_eq!(seen, [header], "{start:?} {chunk:?}");
                    assert_eq!(state(&after), state(start), "stays on the boundary");
                }
                let mut skipped = start.clone();
                if skipped.skip_inside_message(chunk.len()).is_some() {
                    assert!(seen.is_empty(), "{start:?} {chunk:?}");
                    assert_eq!(state(&skipped), state(&after));
                } else {
                    assert_eq!(state(&skipped), state(start), "nothing consumed");
                }
            }
        }
    }
}
