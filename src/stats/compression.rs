//! The uncompressed length of a compressed gRPC message, with tonic's
//! verdict.
//!
//! With compression on, a stats body wrapper sees only compressed bytes;
//! grpc-go reports both the uncompressed `Length` and the
//! `CompressedLength`. [`uncompressed_len`] decodes one message into a
//! small scratch buffer and counts, stopping as soon as the count passes
//! the limit: the output is never kept.
//!
//! The verdict is tonic's (`codec/decode.rs` `decode_chunk`, which calls
//! `codec/compression.rs` `decompress`): a message tonic accepts gives its
//! exact length, one tonic rejects gives the same error kind
//! ([`DecompressError::code`]). Tonic decompresses with
//! `std::io::copy(decoder, limited_buffer)`: the decoder is read 8 KiB at a
//! time and a read that takes the total past the limit is
//! `RESOURCE_EXHAUSTED`, while a read that fails, even one that would have
//! passed the limit, is `INTERNAL`. Which of the two a message that is both
//! corrupt and too large gets therefore depends on how the decoder splits
//! its work into calls, so the decoders here are driven by the same calls
//! on the same input slices as in tonic:
//!
//! - gzip and deflate run flate2's `Decompress` (tonic's `flate2` build,
//!   default pure-Rust backend) under a copy of the loop of flate2's read
//!   decoders (`zio::read`, the gzip header and trailer of
//!   `bufread::GzDecoder`), fed by [`Input`], which hands out the message
//!   in the same 32 KiB windows as flate2's `BufReader` does over tonic's
//!   contiguous buffer. flate2's own decoder types cannot be reused from
//!   one message to the next with borrowed input; its `Decompress` can.
//! - zstd with feature `zstd`: tonic's own decoder, `zstd::stream::read::Decoder`
//!   (the zstd C library), over the same kind of windows
//!   (`DCtx::in_size()` bytes), with a reused context.
//! - zstd without feature `zstd`: `ruzstd`, a pure-Rust decoder, with
//!   tonic's framing rules around it (concatenated and skippable frames,
//!   trailing bytes, checksums, the window limit). It agrees with the C
//!   library on every valid message and on the usual corruptions, but not
//!   on every corrupt input, and is slower: see [`ruzstd_len`].
//!
//! Decoder state is kept per thread and reset for each message (a fresh
//! `Decompress` is a zeroed allocation of some 40 KiB, a fresh zstd
//! context more), without any lock.

// Wired into the body wrapper separately; until then only the tests and
// the bench call it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::fmt;
use std::io::{self, BufRead, Read};

use flate2::{Crc, Decompress, FlushDecompress, Status};
use tonic::Code;

/// Decoded bytes per decoder read: `std::io::copy`'s buffer, which is what
/// tonic reads its decoders with.
const READ_LEN: usize = 8 * 1024;

/// flate2's read decoders buffer their input this much at a time.
const FLATE_WINDOW: usize = 32 * 1024;

/// The most memory a thread's zstd decoder keeps between messages.
const RETAINED_MAX: usize = 16 << 20;

/// zstd's window limit without `ZSTD_d_windowLogMax` (tonic sets none):
/// `ZSTD_MAXWINDOWSIZE_DEFAULT`.
const ZSTD_MAX_WINDOW: u64 = (1 << 27) + 1;

/// A `grpc-encoding` this crate can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `gzip`: flate2's `GzDecoder` in tonic (one gzip member).
    Gzip,
    /// `deflate`: flate2's `ZlibDecoder` in tonic (zlib format).
    Deflate,
    /// `zstd`: the zstd crate's streaming decoder in tonic.
    Zstd,
}

impl Encoding {
    /// The encoding a `grpc-encoding` header value names, as tonic reads
    /// it (`CompressionEncoding::from_encoding_header`): the exact bytes
    /// `gzip`, `deflate` or `zstd`; `identity` is `None` (uncompressed);
    /// anything else is an error (tonic: `UNIMPLEMENTED`). Tonic also
    /// rejects an encoding its server or client was not configured to
    /// accept; that is the caller's to know.
    pub fn from_header(value: &[u8]) -> Result<Option<Encoding>, UnsupportedEncoding> {
        match value {
            b"gzip" => Ok(Some(Encoding::Gzip)),
            b"deflate" => Ok(Some(Encoding::Deflate)),
            b"zstd" => Ok(Some(Encoding::Zstd)),
            b"identity" => Ok(None),
            other => Err(UnsupportedEncoding::new(other)),
        }
    }

    /// The header value (`gzip`, `deflate`, `zstd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `grpc-encoding` this crate (and tonic) cannot decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedEncoding {
    /// The header value, as tonic prints it (the text, or the bytes'
    /// `Debug` form when they are not UTF-8).
    name: String,
}

impl UnsupportedEncoding {
    #[cold]
    fn new(value: &[u8]) -> Self {
        let name = match std::str::from_utf8(value) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("{value:?}"),
        };
        Self { name }
    }

    /// The status tonic answers with: `UNIMPLEMENTED`.
    pub fn code(&self) -> Code {
        Code::Unimplemented
    }
}

impl fmt::Display for UnsupportedEncoding {
    /// Tonic's status message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Content is compressed with `{}` which isn't supported",
            self.name
        )
    }
}

impl std::error::Error for UnsupportedEncoding {}

/// Why a compressed message has no uncompressed length.
#[derive(Debug)]
pub enum DecompressError {
    /// The bytes are not a valid message in their encoding: truncated,
    /// corrupt, a bad checksum, trailing bytes zstd does not accept (tonic:
    /// `INTERNAL`). Holds the decoder's error, whose text is the one in
    /// tonic's status message.
    Corrupt(io::Error),
    /// The message decompresses to more than `limit` bytes (tonic:
    /// `RESOURCE_EXHAUSTED`).
    TooLarge {
        /// The limit that was passed.
        limit: u32,
    },
}

impl DecompressError {
    /// The status tonic's decoder gives for the same message.
    pub fn code(&self) -> Code {
        match self {
            DecompressError::Corrupt(_) => Code::Internal,
            DecompressError::TooLarge { .. } => Code::ResourceExhausted,
        }
    }
}

impl fmt::Display for DecompressError {
    /// Tonic's status message, without its last clause (", while sending
    /// request" / ", while receiving response with status: ...").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompressError::Corrupt(error) => write!(f, "Error decompressing: {error}"),
            DecompressError::TooLarge { limit } => write!(
                f,
                "Error decompressing: size limit, of {limit} bytes, exceeded while decompressing message"
            ),
        }
    }
}

// The decoder's error is part of the message (as in tonic's), so it is not
// also a `source`.
impl std::error::Error for DecompressError {}

impl From<io::Error> for DecompressError {
    fn from(error: io::Error) -> Self {
        DecompressError::Corrupt(error)
    }
}

/// The uncompressed length of one compressed message, whose bytes are
/// `pieces` in order (a message may span several body chunks; they are not
/// concatenated), or tonic's reason to reject it. `limit` is the receiver's
/// maximum message size (tonic's `max_decoding_message_size`, 4 MiB by
/// default): exactly `limit` bytes is accepted, one more is
/// [`DecompressError::TooLarge`].
///
/// Pure: no I/O. Cost: one decode of the message into an 8 KiB scratch
/// buffer, stopped once past `limit`; no allocation once the thread has
/// decoded a message of the same encoding (input that straddles pieces is
/// copied, a window at a time, into a per-thread buffer).
pub fn uncompressed_len<P: AsRef<[u8]>>(
    encoding: Encoding,
    pieces: &[P],
    limit: u32,
) -> Result<u32, DecompressError> {
    with_decoders(|decoders| match encoding {
        Encoding::Gzip => decoders.gzip(pieces, limit),
        Encoding::Deflate => decoders.deflate(pieces, limit),
        #[cfg(feature = "zstd")]
        Encoding::Zstd => decoders.libzstd(pieces, limit),
        #[cfg(not(feature = "zstd"))]
        Encoding::Zstd => decoders.ruzstd(pieces, limit),
    })
}

/// [`uncompressed_len`] for zstd with `ruzstd`, whichever decoder
/// `uncompressed_len` uses.
///
/// It agrees with tonic (the zstd C library) on every valid message
/// (concatenated frames, skippable frames, windows up to zstd's default
/// limit, with or without checksums and content sizes), on truncation,
/// trailing bytes, empty input, bad checksums, content size mismatches,
/// reserved bits, oversized windows, and on the limit. Where it does not:
/// - Huffman-coded literals whose four streams decode to other counts
///   than their headers say: `ruzstd` rejects them
///   (`DecodedLiteralCountMismatch`, `BitstreamReadMismatch`), the C
///   library decodes them (right total length, wrong bytes; tonic's frames
///   carry no checksum to catch it), so tonic accepts or says
///   `RESOURCE_EXHAUSTED` where this says `INTERNAL`. About one randomly
///   bit-flipped tonic frame in four hits this (see the tests).
/// - A message that is corrupt and also longer than `limit`: which error
///   wins depends on how each decoder splits its work into reads.
/// - Legacy zstd formats (v0.5 to v0.7 magic numbers), which tonic's zstd
///   build decodes (its default feature `legacy`) and `ruzstd` does not.
/// - Cost: 3 to 5 times the C library's decode time (BENCHMARKS.md).
pub fn ruzstd_len<P: AsRef<[u8]>>(pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
    with_decoders(|decoders| decoders.ruzstd(pieces, limit))
}

/// [`uncompressed_len`] for zstd with the zstd C library (tonic's decoder).
#[cfg(feature = "zstd")]
pub fn libzstd_len<P: AsRef<[u8]>>(pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
    with_decoders(|decoders| decoders.libzstd(pieces, limit))
}

/// [`uncompressed_len`] with decoders made for this one message and
/// dropped after it, as tonic does: what the per-thread reuse saves.
pub fn uncompressed_len_fresh<P: AsRef<[u8]>>(
    encoding: Encoding,
    pieces: &[P],
    limit: u32,
) -> Result<u32, DecompressError> {
    let mut decoders = Decoders::new();
    match encoding {
        Encoding::Gzip => decoders.gzip(pieces, limit),
        Encoding::Deflate => decoders.deflate(pieces, limit),
        #[cfg(feature = "zstd")]
        Encoding::Zstd => decoders.libzstd(pieces, limit),
        #[cfg(not(feature = "zstd"))]
        Encoding::Zstd => decoders.ruzstd(pieces, limit),
    }
}

thread_local! {
    static DECODERS: RefCell<Decoders> = RefCell::new(Decoders::new());
}

/// Runs `decode` with this thread's decoders, or with fresh ones when they
/// are not available (the thread is exiting). Nothing in `decode` calls
/// back into this module, so they are never already borrowed.
fn with_decoders<T>(mut decode: impl FnMut(&mut Decoders) -> T) -> T {
    DECODERS
        .try_with(|decoders| {
            let mut decoders = decoders.try_borrow_mut().ok()?;
            Some(decode(&mut decoders))
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| decode(&mut Decoders::new()))
}

/// Decoder state, kept per thread; each decoder is made on first use.
struct Decoders {
    /// Where decoded bytes go to be counted.
    out: Box<[u8]>,
    /// An input window that straddles pieces (at most one window).
    spill: Vec<u8>,
    inflate: Option<Decompress>,
    ruzstd: Option<Box<ruzstd::decoding::FrameDecoder>>,
    #[cfg(feature = "zstd")]
    libzstd: Option<zstd::zstd_safe::DCtx<'static>>,
}

impl Decoders {
    fn new() -> Self {
        Self {
            out: vec![0; READ_LEN].into_boxed_slice(),
            spill: Vec::new(),
            inflate: None,
            ruzstd: None,
            #[cfg(feature = "zstd")]
            libzstd: None,
        }
    }

    /// tonic: `std::io::copy(&mut GzDecoder::new(bytes), &mut limited)`.
    fn gzip<P: AsRef<[u8]>>(&mut self, pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
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
        let mut count = Count::new(limit);
        loop {
            let read = inflate_read(&mut input, inflate, &mut self.out)?;
            if read == 0 {
                break;
            }
            crc.update(&self.out[..read]);
            count.add(read)?;
        }
        // The trailer: CRC-32 and length (mod 2^32) of the output; any
        // bytes after it are ignored (`GzDecoder` reads one member).
        let mut trailer = [0; 8];
        read_exact(&mut input, &mut trailer)?;
        let (sum, amount) = trailer.split_at(4);
        if sum != crc.sum().to_le_bytes() || amount != crc.amount().to_le_bytes() {
            return Err(gzip_corrupt().into());
        }
        Ok(count.total)
    }

    /// tonic: `std::io::copy(&mut ZlibDecoder::new(bytes), &mut limited)`.
    fn deflate<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        limit: u32,
    ) -> Result<u32, DecompressError> {
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
        let mut count = Count::new(limit);
        loop {
            let read = inflate_read(&mut input, inflate, out)?;
            if read == 0 {
                return Ok(count.total);
            }
            count.add(read)?;
        }
    }

    /// tonic: `std::io::copy(&mut zstd::stream::read::Decoder::new(bytes)?, &mut limited)`,
    /// the same decoder over the same input windows, with this thread's
    /// context (reset by `with_context`).
    #[cfg(feature = "zstd")]
    fn libzstd<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        limit: u32,
    ) -> Result<u32, DecompressError> {
        let result = self.libzstd_decode(pieces, limit);
        // A frame's header makes the context allocate buffers for the
        // window it declares (up to 128 MiB): those are not kept.
        if self
            .libzstd
            .as_ref()
            .is_some_and(|context| context.sizeof() > RETAINED_MAX)
        {
            self.libzstd = None;
        }
        result
    }

    #[cfg(feature = "zstd")]
    fn libzstd_decode<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        limit: u32,
    ) -> Result<u32, DecompressError> {
        use zstd::zstd_safe::DCtx;
        let context = match &mut self.libzstd {
            Some(context) => context,
            none => none.insert(DCtx::try_create().ok_or_else(|| {
                io::Error::other("zstd could not allocate a decompression context")
            })?),
        };
        let input = Input::new(pieces, DCtx::in_size(), &mut self.spill);
        let mut decoder = zstd::stream::read::Decoder::with_context(input, context);
        let mut count = Count::new(limit);
        loop {
            let read = decoder.read(&mut self.out)?;
            if read == 0 {
                return Ok(count.total);
            }
            count.add(read)?;
        }
    }

    /// zstd with `ruzstd`, framed as the zstd crate's streaming decoder
    /// frames it: frames until the input ends (an empty input is an
    /// incomplete frame), skippable frames skipped, every byte must belong
    /// to a frame.
    fn ruzstd<P: AsRef<[u8]>>(&mut self, pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
        let result = self.ruzstd_decode(pieces, limit);
        // The decoder's buffer grows with what it decodes (up to the
        // window): a large one is not kept.
        let small = matches!(result, Ok(len) if len as usize <= RETAINED_MAX);
        if !small && limit as usize > RETAINED_MAX {
            self.ruzstd = None;
        }
        result
    }

    fn ruzstd_decode<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        limit: u32,
    ) -> Result<u32, DecompressError> {
        use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
        let decoder = self.ruzstd.get_or_insert_with(|| {
            let mut decoder = FrameDecoder::new();
            decoder.set_max_window_size(ZSTD_MAX_WINDOW);
            Box::new(decoder)
        });
        // ruzstd reads what it needs, block by block: no windows.
        let mut input = Input::new(pieces, 0, &mut self.spill);
        let mut count = Count::new(limit);
        if input.len == 0 {
            return Err(incomplete_frame().into());
        }
        while input.remaining() > 0 {
            let mut head = [0; 5];
            let peeked = input.peek(&mut head);
            if peeked < 4 {
                return Err(zstd_error("Unknown frame descriptor").into());
            }
            let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                // A skippable frame: magic, 4-byte length, that many bytes.
                input.skip(4);
                let mut size = [0; 4];
                if input.peek(&mut size) < size.len() {
                    return Err(incomplete_frame().into());
                }
                input.skip(size.len());
                let skip = u32::from_le_bytes(size) as usize;
                if input.remaining() < skip {
                    return Err(incomplete_frame().into());
                }
                input.skip(skip);
                continue;
            }
            if magic != 0xFD2F_B528 {
                return Err(zstd_error("Unknown frame descriptor").into());
            }
            // Frame_Header_Descriptor's reserved bit must be zero; ruzstd
            // does not check it.
            if peeked == 5 && head[4] & 0x08 != 0 {
                return Err(zstd_error("Unsupported frame parameter").into());
            }
            decoder
                .reset(Unbuffered(&mut input))
                .map_err(ruzstd_error)?;
            let declared = frame_declares_size(&head);
            let content_size = decoder.content_size();
            // The C library decodes a frame whose declared content fits
            // the read's buffer in one pass, and hands nothing out unless
            // the whole frame is valid: count such a frame once verified.
            let one_pass = declared && content_size <= READ_LEN as u64;
            let mut frame = if one_pass {
                Count::new(READ_LEN as u32)
            } else {
                Count::new(limit - count.total)
            };
            let drained = (|| {
                while !decoder.is_finished() {
                    decoder
                        .decode_blocks(
                            Unbuffered(&mut input),
                            BlockDecodingStrategy::UptoBytes(READ_LEN),
                        )
                        .map_err(ruzstd_error)?;
                    drain(decoder, &mut self.out, &mut frame)?;
                }
                drain(decoder, &mut self.out, &mut frame)
            })();
            match drained {
                Err(DecompressError::TooLarge { .. }) if one_pass => {
                    return Err(zstd_error("Destination buffer is too small").into());
                }
                Err(DecompressError::TooLarge { .. }) => {
                    return Err(DecompressError::TooLarge { limit });
                }
                other => other?,
            }
            if let Some(stored) = decoder.get_checksum_from_data()
                && decoder.get_calculated_checksum() != Some(stored)
            {
                return Err(zstd_error("Restored data doesn't match checksum").into());
            }
            if declared && u64::from(frame.total) != content_size {
                return Err(zstd_error("Data corruption detected").into());
            }
            count.add(frame.total as usize)?;
        }
        Ok(count.total)
    }
}

/// Whether a zstd frame header (magic and descriptor) declares a content
/// size: a `Frame_Content_Size_flag`, or a single segment.
fn frame_declares_size(head: &[u8; 5]) -> bool {
    let descriptor = head[4];
    descriptor >> 6 != 0 || descriptor & 0x20 != 0
}

/// Counts what `decoder` can hand out now.
fn drain(
    decoder: &mut ruzstd::decoding::FrameDecoder,
    out: &mut [u8],
    count: &mut Count,
) -> Result<(), DecompressError> {
    loop {
        let read = decoder.read(out)?;
        if read == 0 {
            return Ok(());
        }
        count.add(read)?;
    }
}

#[cold]
fn ruzstd_error(error: ruzstd::decoding::errors::FrameDecoderError) -> DecompressError {
    DecompressError::Corrupt(io::Error::new(
        io::ErrorKind::InvalidData,
        error.to_string(),
    ))
}

#[cold]
fn zstd_error(message: &'static str) -> io::Error {
    io::Error::other(message)
}

/// The zstd crate's error for input that ends inside a frame.
#[cold]
fn incomplete_frame() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "incomplete frame")
}

/// The running total, checked against the limit as tonic's limited buffer
/// checks each write.
struct Count {
    total: u32,
    limit: u32,
}

impl Count {
    fn new(limit: u32) -> Self {
        Self { total: 0, limit }
    }

    #[inline]
    fn add(&mut self, read: usize) -> Result<(), DecompressError> {
        match u32::try_from(read)
            .ok()
            .and_then(|read| self.total.checked_add(read))
        {
            Some(total) if total <= self.limit => {
                self.total = total;
                Ok(())
            }
            _ => Err(DecompressError::TooLarge { limit: self.limit }),
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

/// A message's bytes, read as tonic's decoders read its contiguous buffer:
/// through a `BufReader` of `capacity` bytes. [`window`](Self::window)
/// (`fill_buf`) hands out the same slices, so each decoder call sees the
/// same input as in tonic: a window inside one piece is lent as it is,
/// one that straddles pieces is copied into `spill`.
struct Input<'p, 's, P> {
    pieces: &'p [P],
    /// The piece that holds `pos` (advanced lazily), and where it starts.
    piece: usize,
    piece_start: usize,
    /// The read position and the end of the buffered window (empty when
    /// equal), as offsets into the message.
    pos: usize,
    end: usize,
    len: usize,
    capacity: usize,
    spill: &'s mut Vec<u8>,
    /// Where the window in `spill` starts, when the window is there.
    spilled: Option<usize>,
}

impl<'p, 's, P: AsRef<[u8]>> Input<'p, 's, P> {
    fn new(pieces: &'p [P], capacity: usize, spill: &'s mut Vec<u8>) -> Self {
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

    fn remaining(&self) -> usize {
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
    fn window(&mut self) -> &[u8] {
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
    fn consume(&mut self, amount: usize) {
        self.pos = self.end.min(self.pos + amount);
    }

    /// flate2's `BufReader::read`: a read at least as large as the buffer,
    /// with nothing buffered, bypasses it.
    fn read_into(&mut self, buf: &mut [u8]) -> usize {
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
    fn read_unbuffered(&mut self, buf: &mut [u8]) -> usize {
        let read = self.peek(buf);
        self.skip(read);
        read
    }

    /// Copies the next bytes into `buf` without consuming them; returns how
    /// many there were.
    fn peek(&mut self, buf: &mut [u8]) -> usize {
        let read = buf.len().min(self.remaining());
        self.find_piece();
        self.copy_out(self.pos, &mut buf[..read]);
        read
    }

    /// Consumes `amount` bytes (at most what remains), buffered or not.
    fn skip(&mut self, amount: usize) {
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
struct Unbuffered<'i, 'p, 's, P>(&'i mut Input<'p, 's, P>);

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
