//! [`Pieces`]: the bytes of the message in progress that a body keeps
//! until it completes, when a handler needs them (its bytes, or its
//! uncompressed size).

use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// Chunks shorter than this are copied into one buffer rather than kept as
/// slices. A slice costs a 32-byte handle and keeps alive the whole buffer
/// it points into (h2's read buffer, shared with every frame read with
/// it), both more than a short chunk's own bytes: a peer trickling a
/// message one byte per DATA frame would otherwise make the layer hold 32
/// bytes of handles per byte received, kept (as capacity) for the rest of
/// the body. Longer chunks, the usual case, are shared without a copy.
pub(crate) const SHARE_MIN: usize = 512;

/// The bytes of the message in progress, in order: longer chunks as
/// shared slices, runs of short ones copied together.
///
/// Memory: at most twice the bytes of the short chunks (one growing
/// buffer), plus a 32-byte handle per long chunk (at most 1/16 of its
/// length).
#[derive(Debug, Default)]
pub(crate) struct Pieces {
    /// Complete pieces, in order, ahead of `short`.
    shared: Vec<Bytes>,
    /// Short chunks received since the last piece in `shared`, copied.
    short: BytesMut,
}

impl Pieces {
    /// Appends `chunk`'s bytes.
    #[inline]
    pub(crate) fn push(&mut self, chunk: &Bytes) {
        self.push_part(chunk, 0..chunk.len());
    }

    /// Appends the bytes of `chunk` in `range`.
    #[inline]
    pub(crate) fn push_part(&mut self, chunk: &Bytes, range: Range<usize>) {
        if range.len() < SHARE_MIN {
            self.short.extend_from_slice(&chunk[range]);
        } else {
            self.close_short();
            self.shared.push(chunk.slice(range));
        }
    }

    /// Moves the copied short chunks into `shared`, as one piece.
    fn close_short(&mut self) {
        if !self.short.is_empty() {
            self.shared.push(self.short.split().freeze());
        }
    }

    /// Every byte so far, in order (the copied short chunks closed into a
    /// piece of their own).
    pub(crate) fn all(&mut self) -> &[Bytes] {
        self.close_short();
        &self.shared
    }

    /// Forgets the message, keeping the list's capacity for the next
    /// (bounded: see [`push`](Self::push)).
    pub(crate) fn clear(&mut self) {
        self.shared.clear();
        self.short.clear();
    }

    /// How many pieces are kept (for tests).
    #[cfg(test)]
    fn pieces(&self) -> usize {
        self.shared.len() + usize::from(!self.short.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces' bytes, concatenated.
    fn concat(pieces: &mut Pieces) -> Vec<u8> {
        pieces
            .all()
            .iter()
            .flat_map(|piece| piece.to_vec())
            .collect()
    }

    #[test]
    fn a_message_trickled_a_byte_at_a_time_is_kept_in_one_piece() {
        let mut pieces = Pieces::default();
        let message: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        for byte in &message {
            pieces.push(&Bytes::copy_from_slice(&[*byte]));
        }
        // One copied buffer, not a 32-byte handle (and the buffer it
        // points into) per byte.
        assert_eq!(pieces.pieces(), 1);
        assert!(pieces.short.capacity() <= 2 * message.len());
        assert_eq!(concat(&mut pieces), message);
    }

    #[test]
    fn long_chunks_are_shared_and_order_is_kept_around_short_ones() {
        let long = Bytes::from(vec![7u8; SHARE_MIN]);
        let mut pieces = Pieces::default();
        pieces.push(&Bytes::from_static(b"ab"));
        pieces.push(&long);
        pieces.push_part(&Bytes::from_static(b"xcd"), 1..2);
        pieces.push_part(&Bytes::from_static(b"xcd"), 2..3);
        pieces.push_part(&long, 0..SHARE_MIN);
        let all = pieces.all().to_vec();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0], "ab");
        assert_eq!(all[2], "cd");
        // The long chunks are the same buffers, not copies.
        assert_eq!(all[1].as_ptr(), long.as_ptr());
        assert_eq!(all[3].as_ptr(), long.as_ptr());

        pieces.clear();
        assert_eq!(pieces.pieces(), 0);
        pieces.push(&Bytes::from_static(b"e"));
        assert_eq!(concat(&mut pieces), b"e");
    }
}
