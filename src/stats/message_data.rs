//! [`MessageData`]: the bytes of one gRPC message, as a payload event
//! carries them for handlers that ask.

use bytes::{BufMut, Bytes, BytesMut};

#[cfg(doc)]
use crate::stats::{Payload, StatsHandler};

/// The bytes of one gRPC message, uncompressed, without its 5-byte prefix
/// ([`Payload::data`], given to handlers that ask with
/// [`StatsHandler::MESSAGE_DATA`]).
///
/// A message arrives in one or more body chunks; its bytes are those
/// chunks' buffers, shared and in order (`pieces`), not a copy (runs of
/// chunks under 512 bytes are copied into one piece). A compressed message
/// is given decompressed, in one piece.
///
/// ```
/// use bytes::Bytes;
/// use tonic_hotpath::stats::MessageData;
///
/// let pieces = [Bytes::from_static(b"hel"), Bytes::from_static(b"lo")];
/// let data = MessageData::new(&pieces);
/// assert_eq!(data.len(), 5);
/// assert_eq!(data.prefix(4), Bytes::from_static(b"hell"));
/// assert_eq!(data.to_bytes(), Bytes::from_static(b"hello"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageData<'a> {
    pieces: &'a [Bytes],
}

impl<'a> MessageData<'a> {
    /// The message made of `pieces`, in order.
    #[must_use]
    pub fn new(pieces: &'a [Bytes]) -> Self {
        Self { pieces }
    }

    /// The buffers holding the message, in order (empty ones possible).
    #[must_use]
    pub fn pieces(&self) -> &'a [Bytes] {
        self.pieces
    }

    /// The message's length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }

    /// Whether the message is empty (a valid, zero-length message).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pieces.iter().all(Bytes::is_empty)
    }

    /// The message's first `max` bytes (all of it when it is shorter):
    /// a shared slice of its buffer when they lie in one piece, a copy of
    /// them (at most `max` bytes) when they span several.
    #[must_use]
    pub fn prefix(&self, max: usize) -> Bytes {
        let mut nonempty = self.pieces.iter().filter(|piece| !piece.is_empty());
        let Some(first) = nonempty.next() else {
            return Bytes::new();
        };
        if first.len() >= max {
            return first.slice(..max);
        }
        if nonempty.clone().next().is_none() {
            return first.clone();
        }
        let wanted = self.len().min(max);
        let mut joined = BytesMut::with_capacity(wanted);
        for piece in self.pieces {
            let room = wanted - joined.len();
            if room == 0 {
                break;
            }
            joined.put_slice(&piece[..piece.len().min(room)]);
        }
        joined.freeze()
    }

    /// The whole message in one buffer: shared when it lies in one piece,
    /// else copied.
    #[must_use]
    pub fn to_bytes(&self) -> Bytes {
        self.prefix(usize::MAX)
    }
}
