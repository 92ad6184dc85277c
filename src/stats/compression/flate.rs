//! gzip and deflate: flate2's `Decompress` driven as flate2's read decoders
//! drive it in tonic.

use std::io;

use flate2::{Crc, Decompress, FlushDecompress, Status};

use super::input::Input;
use super::{Count, Decoders, DecompressError, FLATE_WINDOW};

impl Decoders {
    /// tonic: `std::io::copy(&mut GzDecoder::new(bytes), &mut limited)`.
    pub(super) fn gzip<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        let mut input = Input::new(pieces, FLATE_WINDOW, &mut self.spill);
        // `GzDecoder::new` parses the header at once; its error is the
        // first read's.
        read_gzip_header(&mut input)?;
        let inflate = match &mut self.inflate {
            Some(inflate) => {
                inflate.reset(false);
                inflate
            }
            none => none.insert(Decompress::new(false)),
        };
        let mut crc = Crc::new();
        loop {
            let read = inflate_read(&mut input, inflate, &mut self.out)?;
            if read == 0 {
                break;
            }
            crc.update(&self.out[..read]);
            count.add(&self.out[..read])?;
        }
        // The trailer: CRC-32 and length (mod 2^32) of the output; any
        // bytes after it are ignored (`GzDecoder` reads one member).
        let mut trailer = [0; 8];
        read_exact(&mut input, &mut trailer)?;
        let (sum, amount) = trailer.split_at(4);
        if sum != crc.sum().to_le_bytes() || amount != crc.amount().to_le_bytes() {
            return Err(gzip_corrupt().into());
        }
        Ok(())
    }

    /// tonic: `std::io::copy(&mut ZlibDecoder::new(bytes), &mut limited)`.
    pub(super) fn deflate<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        let Self {
            out,
            spill,
            inflate,
            ..
        } = self;
        let inflate = match inflate {
            Some(inflate) => {
                inflate.reset(true);
                inflate
            }
            none => none.insert(Decompress::new(true)),
        };
        let mut input = Input::new(pieces, FLATE_WINDOW, spill);
        loop {
            let read = inflate_read(&mut input, inflate, out)?;
            if read == 0 {
                return Ok(());
            }
            count.add(&out[..read])?;
        }
    }
}

/// flate2's `zio::read`: one read of a flate2 read decoder, `dst` being
/// what the caller offers (8 KiB in tonic).
fn inflate_read<P: AsRef<[u8]>>(
    input: &mut Input<'_, '_, P>,
    data: &mut Decompress,
    dst: &mut [u8],
) -> io::Result<usize> {
    loop {
        let (read, consumed, ret, eof);
        {
            let window = input.window();
            eof = window.is_empty();
            let before_out = data.total_out();
            let before_in = data.total_in();
            let flush = if eof {
                FlushDecompress::Finish
            } else {
                FlushDecompress::None
            };
            ret = data.decompress(window, dst, flush);
            // Both differences are bounded by the slices' lengths.
            read = (data.total_out() - before_out) as usize;
            consumed = (data.total_in() - before_in) as usize;
        }
        input.consume(consumed);
        match ret {
            Ok(Status::Ok | Status::BufError) if read == 0 && !eof && !dst.is_empty() => continue,
            Ok(Status::Ok | Status::BufError) if read == 0 && eof && !dst.is_empty() => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "incomplete deflate stream",
                ));
            }
            Ok(Status::Ok | Status::BufError | Status::StreamEnd) => return Ok(read),
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "corrupt deflate stream",
                ));
            }
        }
    }
}

// gzip header flags (RFC 1952), as flate2 names them.
const FHCRC: u8 = 1 << 1;
const FEXTRA: u8 = 1 << 2;
const FNAME: u8 = 1 << 3;
const FCOMMENT: u8 = 1 << 4;
const FRESERVED: u8 = 1 << 5 | 1 << 6 | 1 << 7;
/// flate2's limit on the file name and comment fields.
const MAX_HEADER_FIELD: usize = 65535;

/// flate2's `GzHeaderParser::parse`, keeping nothing but the header CRC:
/// the same reads, in the same order, with the same errors.
fn read_gzip_header<P: AsRef<[u8]>>(input: &mut Input<'_, '_, P>) -> io::Result<()> {
    let mut start = [0; 10];
    read_exact(input, &mut start)?;
    if start[0] != 0x1f || start[1] != 0x8b || start[2] != 8 {
        return Err(bad_gzip_header());
    }
    let flags = start[3];
    if flags & FRESERVED != 0 {
        return Err(bad_gzip_header());
    }
    let mut crc = (flags & FHCRC != 0).then(Crc::new);
    let mut update = |bytes: &[u8]| {
        if let Some(crc) = &mut crc {
            crc.update(bytes);
        }
    };
    update(&start);
    if flags & FEXTRA != 0 {
        let mut xlen = [0; 2];
        read_exact(input, &mut xlen)?;
        update(&xlen);
        // flate2 reads the field into a buffer of its size, which decides
        // how its `BufReader` serves the reads; so does this.
        let mut extra = vec![0; usize::from(u16::from_le_bytes(xlen))];
        if !extra.is_empty() {
            read_exact(input, &mut extra)?;
        }
        update(&extra);
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let mut len = 0;
            loop {
                let mut byte = [0];
                if input.read_into(&mut byte) == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                update(&byte);
                if byte[0] == 0 {
                    break;
                }
                if len == MAX_HEADER_FIELD {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "gzip header field too long",
                    ));
                }
                len += 1;
            }
        }
    }
    if let Some(crc) = crc {
        let mut stored = [0; 2];
        read_exact(input, &mut stored)?;
        if u16::from_le_bytes(stored) != crc.sum() as u16 {
            return Err(gzip_corrupt());
        }
    }
    Ok(())
}

/// flate2's `read_into` loop: reads until `buf` is full; input that ends
/// first is `UnexpectedEof`.
fn read_exact<P: AsRef<[u8]>>(input: &mut Input<'_, '_, P>, buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read_into(&mut buf[filled..]) {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            read => filled += read,
        }
    }
    Ok(())
}

#[cold]
fn bad_gzip_header() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "invalid gzip header")
}

#[cold]
fn gzip_corrupt() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "corrupt gzip stream does not have a matching checksum",
    )
}
