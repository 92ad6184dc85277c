//! [`Input`]: a message's pieces read as tonic's decoders read its
//! contiguous buffer.

use std::io::{self, BufRead, Read};

/// A message's bytes, read as tonic's decoders read its contiguous buffer:
/// through a `BufReader` of `capacity` bytes. [`window`](Self::window)
/// (`fill_buf`) hands out the same slices, so each decoder call sees the
/// same input as in tonic: a window inside one piece is lent as it is,
/// one that straddles pieces is copied into `spill`.
pub(super) struct Input<'p, 's, P> {
    pieces: &'p [P],
    /// The piece that holds `pos` (advanced lazily), and where it starts.
    piece: usize,
    piece_start: usize,
    /// The read position and the end of the buffered window (empty when
    /// equal), as offsets into the message.
    pos: usize,
    end: usize,
    pub(super) len: usize,
    capacity: usize,
    spill: &'s mut Vec<u8>,
    /// Where the window in `spill` starts, when the window is there.
    spilled: Option<usize>,
}

impl<'p, 's, P: AsRef<[u8]>> Input<'p, 's, P> {
    pub(super) fn new(pieces: &'p [P], capacity: usize, spill: &'s mut Vec<u8>) -> Self {
        Self {
            pieces,
            piece: 0,
            piece_start: 0,
            pos: 0,
            end: 0,
            len: pieces.iter().map(|piece| piece.as_ref().len()).sum(),
            capacity,
            spill,
            spilled: None,
        }
    }

    pub(super) fn remaining(&self) -> usize {
        self.len - self.pos
    }

    /// Moves `piece` to the one that holds `pos` (skipping empty pieces).
    fn find_piece(&mut self) {
        while let Some(piece) = self.pieces.get(self.piece) {
            let piece_len = piece.as_ref().len();
            if self.pos < self.piece_start + piece_len {
                return;
            }
            self.piece_start += piece_len;
            self.piece += 1;
        }
    }

    /// Copies the message's bytes `[from, from + dst.len())` into `dst`,
    /// starting the search at `piece`.
    fn copy_out(&self, from: usize, dst: &mut [u8]) {
        let (mut piece, mut piece_start) = (self.piece, self.piece_start);
        let mut at = from;
        let mut filled = 0;
        while filled < dst.len() {
            let bytes = self.pieces[piece].as_ref();
            let piece_end = piece_start + bytes.len();
            if at < piece_end {
                let take = (piece_end - at).min(dst.len() - filled);
                let offset = at - piece_start;
                dst[filled..filled + take].copy_from_slice(&bytes[offset..offset + take]);
                filled += take;
                at += take;
            }
            piece_start = piece_end;
            piece += 1;
        }
    }

    /// `BufReader::fill_buf`: the rest of the window, refilled (up to
    /// `capacity` bytes) once it is used up; empty at the end.
    pub(super) fn window(&mut self) -> &[u8] {
        if self.pos == self.end {
            self.end = self.len.min(self.pos.saturating_add(self.capacity));
            self.spilled = None;
            if self.pos == self.end {
                return &[];
            }
            self.find_piece();
            let piece_end = self.piece_start + self.pieces[self.piece].as_ref().len();
            if self.end > piece_end {
                let mut spill = std::mem::take(self.spill);
                spill.clear();
                spill.resize(self.end - self.pos, 0);
                self.copy_out(self.pos, &mut spill);
                *self.spill = spill;
                self.spilled = Some(self.pos);
            }
        }
        match self.spilled {
            Some(start) => &self.spill[self.pos - start..self.end - start],
            None => {
                let offset = self.piece_start;
                &self.pieces[self.piece].as_ref()[self.pos - offset..self.end - offset]
            }
        }
    }

    /// `BufRead::consume`.
    pub(super) fn consume(&mut self, amount: usize) {
        self.pos = self.end.min(self.pos + amount);
    }

    /// flate2's `BufReader::read`: a read at least as large as the buffer,
    /// with nothing buffered, bypasses it.
    pub(super) fn read_into(&mut self, buf: &mut [u8]) -> usize {
        if self.pos == self.end && buf.len() >= self.capacity {
            let read = buf.len().min(self.remaining());
            self.find_piece();
            self.copy_out(self.pos, &mut buf[..read]);
            self.pos += read;
            self.end = self.pos;
            self.spilled = None;
            return read;
        }
        let window = self.window();
        let read = window.len().min(buf.len());
        buf[..read].copy_from_slice(&window[..read]);
        self.consume(read);
        read
    }

    /// Reads straight from the pieces, bypassing any window.
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    pub(super) fn read_unbuffered(&mut self, buf: &mut [u8]) -> usize {
        let read = self.peek(buf);
        self.skip(read);
        read
    }

    /// Copies the next bytes into `buf` without consuming them; returns how
    /// many there were.
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    pub(super) fn peek(&mut self, buf: &mut [u8]) -> usize {
        let read = buf.len().min(self.remaining());
        self.find_piece();
        self.copy_out(self.pos, &mut buf[..read]);
        read
    }

    /// Consumes `amount` bytes (at most what remains), buffered or not.
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    pub(super) fn skip(&mut self, amount: usize) {
        self.pos += amount.min(self.remaining());
        if self.pos > self.end {
            self.end = self.pos;
            self.spilled = None;
        }
    }
}

impl<P: AsRef<[u8]>> Read for Input<'_, '_, P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.read_into(buf))
    }
}

/// An [`Input`] read without windows (for `ruzstd`, which reads exactly
/// what it needs).
#[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
pub(super) struct Unbuffered<'i, 'p, 's, P>(pub(super) &'i mut Input<'p, 's, P>);

#[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
impl<P: AsRef<[u8]>> Read for Unbuffered<'_, '_, '_, P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.0.read_unbuffered(buf))
    }
}

impl<P: AsRef<[u8]>> BufRead for Input<'_, '_, P> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(self.window())
    }

    fn consume(&mut self, amount: usize) {
        Input::consume(self, amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The windows and reads an [`Input`] hands out, consuming `step`
    /// bytes of each window, then reading `read` bytes at a time.
    fn walk(pieces: &[&[u8]], step: usize, read: usize) -> Vec<Vec<u8>> {
        let mut spill = Vec::new();
        let mut input = Input::new(pieces, 1000, &mut spill);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let window = input.window().to_vec();
            input.consume(step.min(window.len()));
            seen.push(window);
        }
        let mut buf = vec![0; read];
        loop {
            let n = input.read_into(&mut buf);
            seen.push(buf[..n].to_vec());
            if n == 0 {
                return seen;
            }
        }
    }

    #[test]
    fn input_hands_out_the_same_windows_however_the_message_is_split() {
        let message: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for (step, read) in [(1000, 300), (10, 1000), (999, 2500)] {
            let whole = walk(&[&message], step, read);
            for cuts in [
                [1, 2, 3],
                [999, 1000, 1001],
                [0, 2500, 5000],
                [17, 17, 4999],
            ] {
                let pieces = [
                    &message[..cuts[0]],
                    &message[cuts[0]..cuts[1]],
                    &message[cuts[1]..cuts[2]],
                    &message[cuts[2]..],
                ];
                assert_eq!(walk(&pieces, step, read), whole, "{cuts:?} {step} {read}");
            }
        }
    }

    #[test]
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    fn peek_skip_and_unbuffered_reads_cross_pieces() {
        let pieces: [&[u8]; 4] = [b"ab", b"", b"cde", b"f"];
        let mut spill = Vec::new();
        let mut input = Input::new(&pieces, 0, &mut spill);
        let mut head = [0; 4];
        assert_eq!(input.peek(&mut head), 4);
        assert_eq!(&head, b"abcd");
        input.skip(1);
        assert_eq!(input.read_unbuffered(&mut head), 4);
        assert_eq!(&head, b"bcde");
        input.skip(9);
        assert_eq!(
            (input.remaining(), input.read_unbuffered(&mut head)),
            (0, 0)
        );
    }
}
