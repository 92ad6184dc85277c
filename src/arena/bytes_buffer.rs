//! An arena-backed, growable byte buffer (go-arena's `Buffer`).

use std::{fmt, io};

use allocator_api2::collections::TryReserveErrorKind;
use allocator_api2::vec::Vec;

use super::{AllocError, MonotonicArena};

/// A growable byte buffer whose storage lives in a [`MonotonicArena`],
/// implementing [`std::io::Write`] and [`std::fmt::Write`].
///
/// The first write (or [`reserve`](Self::reserve)) takes exactly the room
/// it needs, like go-arena's `Buffer`/`SliceAppend`, so an arena's `len`
/// and `peak` (and an [`ArenaPool`](super::ArenaPool)'s sizing) match
/// go-arena's; later growth at least doubles the capacity. Growth goes
/// through the arena's allocator, which extends the buffer in place while
/// it is the newest allocation in the current arena buffer.
/// Running out of memory is an error (`io::ErrorKind::OutOfMemory`,
/// `fmt::Error`), never an abort.
///
/// ```
/// use std::fmt::Write as _;
/// use tonic_hotpath::arena::{ByteBuffer, MonotonicArena};
///
/// let arena = MonotonicArena::new();
/// let mut out = ByteBuffer::new(&arena);
/// write!(out, "{{\"id\":{}", 7).unwrap(); // fmt::Write
/// std::io::Write::write_all(&mut out, b",\"ok\":true}").unwrap(); // io::Write
/// assert_eq!(out.as_str(), Ok(r#"{"id":7,"ok":true}"#));
/// let frozen: &[u8] = out.into_bytes(); // lives as long as the arena borrow
/// assert_eq!(frozen.len(), 18);
/// ```
pub struct ByteBuffer<'a> {
    bytes: Vec<u8, &'a MonotonicArena>,
}

impl<'a> ByteBuffer<'a> {
    /// An empty buffer; allocates nothing until the first write.
    pub fn new(arena: &'a MonotonicArena) -> Self {
        ByteBuffer {
            bytes: Vec::new_in(arena),
        }
    }

    /// An empty buffer with room for `capacity` bytes.
    pub fn with_capacity(arena: &'a MonotonicArena, capacity: usize) -> Result<Self, AllocError> {
        let mut buffer = ByteBuffer::new(arena);
        buffer.reserve(capacity)?;
        Ok(buffer)
    }

    /// Makes room for `additional` more bytes: exactly that much on an
    /// empty buffer with no capacity (go-arena sizes a first append
    /// exactly), amortised growth (at least doubling) after that.
    pub fn reserve(&mut self, additional: usize) -> Result<(), AllocError> {
        let wanted = self.bytes.len().saturating_add(additional);
        let reserved = if self.bytes.capacity() == 0 {
            self.bytes.try_reserve_exact(additional)
        } else {
            self.bytes.try_reserve(additional)
        };
        reserved.map_err(|e| match e.kind() {
            TryReserveErrorKind::AllocError { layout, .. } => AllocError::OutOfMemory {
                buffer_size: layout.size(),
            },
            TryReserveErrorKind::CapacityOverflow => AllocError::SizeOverflow {
                size: wanted,
                align: 1,
            },
        })
    }

    /// Appends `data`.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<(), AllocError> {
        self.reserve(data.len())?;
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes written so far as UTF-8.
    pub fn as_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.bytes)
    }

    /// Number of bytes written.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Bytes the buffer can hold without growing.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Forgets the contents, keeping the capacity.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// Freezes the buffer into a slice that lives as long as the arena
    /// borrow.
    pub fn into_bytes(self) -> &'a mut [u8] {
        self.bytes.leak()
    }
}

impl io::Write for ByteBuffer<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.extend_from_slice(data)
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.write(data).map(drop)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Write for ByteBuffer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.extend_from_slice(s.as_bytes()).map_err(|_| fmt::Error)
    }
}

impl fmt::Debug for ByteBuffer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByteBuffer")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn first_write_takes_exactly_its_size_like_go_arena() {
        let arena = MonotonicArena::new();
        let mut out = ByteBuffer::new(&arena);
        out.write_all(b"hello").unwrap();
        // go-arena's SliceAppend: a first append of 5 bytes makes cap 5.
        assert_eq!((out.capacity(), arena.len(), arena.peak()), (5, 5, 5));
        out.write_all(b"!").unwrap(); // then doubling, in place
        assert_eq!((out.capacity(), arena.len()), (10, 10));

        let mut one = ByteBuffer::new(&arena);
        one.write_all(b"x").unwrap();
        assert_eq!(one.capacity(), 1);
        let reserved = ByteBuffer::with_capacity(&arena, 3).unwrap();
        assert_eq!(reserved.capacity(), 3);
        assert_eq!(arena.len(), 10 + 1 + 3);
    }
}
