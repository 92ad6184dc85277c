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
//!   `bufread::GzDecoder`), fed by `input::Input`, which hands out the message
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

mod flate;
mod input;
#[cfg(feature = "zstd")]
mod libzstd;
#[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
mod ruzstd_frames;

use std::cell::RefCell;
use std::fmt;
use std::io;

use flate2::Decompress;

/// Decoded bytes per decoder read: `std::io::copy`'s buffer, which is what
/// tonic reads its decoders with.
const READ_LEN: usize = 8 * 1024;

/// flate2's read decoders buffer their input this much at a time.
const FLATE_WINDOW: usize = 32 * 1024;

/// The most memory a thread's `ruzstd` decoder keeps between messages.
#[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
const RETAINED_MAX: usize = 16 << 20;

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
    #[cfg(feature = "bench-internals")]
    pub fn code(&self) -> tonic::Code {
        tonic::Code::Unimplemented
    }

    /// The encoding's name as it was given (lossily, if not UTF-8).
    pub fn name(&self) -> &str {
        &self.name
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
    #[cfg(feature = "bench-internals")]
    pub fn code(&self) -> tonic::Code {
        match self {
            DecompressError::Corrupt(_) => tonic::Code::Internal,
            DecompressError::TooLarge { .. } => tonic::Code::ResourceExhausted,
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
/// copied, a window at a time, into a per-thread buffer), except with
/// feature `zstd`: the C library's buffers for a streamed frame's window
/// are allocated for each message, as tonic does, because a context that
/// kept them judges some corrupt frames differently.
pub fn uncompressed_len<P: AsRef<[u8]>>(
    encoding: Encoding,
    pieces: &[P],
    limit: u32,
) -> Result<u32, DecompressError> {
    with_decoders(|decoders| decoders.decode(encoding, pieces, Count::new(limit))).map(|c| c.total)
}

/// One compressed message, decompressed (with the same decoders and
/// verdicts as [`uncompressed_len`]): its bytes, at most `limit` of them,
/// kept in one buffer that grows with what is decoded (never sized by
/// what the message declares).
pub(crate) fn decompress<P: AsRef<[u8]>>(
    encoding: Encoding,
    pieces: &[P],
    limit: u32,
) -> Result<Vec<u8>, DecompressError> {
    with_decoders(|decoders| decoders.decode(encoding, pieces, Count::keeping(limit)))
        .map(|count| count.kept.unwrap_or_default())
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
#[cfg(feature = "bench-internals")]
pub fn ruzstd_len<P: AsRef<[u8]>>(pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
    let mut count = Count::new(limit);
    with_decoders(|decoders| decoders.ruzstd(pieces, &mut count))?;
    Ok(count.total)
}

/// [`uncompressed_len`] for zstd with the zstd C library (tonic's decoder).
#[cfg(all(feature = "zstd", feature = "bench-internals"))]
pub fn libzstd_len<P: AsRef<[u8]>>(pieces: &[P], limit: u32) -> Result<u32, DecompressError> {
    let mut count = Count::new(limit);
    with_decoders(|decoders| decoders.libzstd(pieces, &mut count))?;
    Ok(count.total)
}

/// [`uncompressed_len`] with decoders made for this one message and
/// dropped after it, as tonic does: what the per-thread reuse saves.
#[cfg(feature = "bench-internals")]
pub fn uncompressed_len_fresh<P: AsRef<[u8]>>(
    encoding: Encoding,
    pieces: &[P],
    limit: u32,
) -> Result<u32, DecompressError> {
    Decoders::new()
        .decode(encoding, pieces, Count::new(limit))
        .map(|count| count.total)
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
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    ruzstd: Option<Box<ruzstd::decoding::FrameDecoder>>,
    #[cfg(feature = "zstd")]
    libzstd: Option<zstd::zstd_safe::DCtx<'static>>,
    /// The size of a new zstd context, without buffers.
    #[cfg(feature = "zstd")]
    libzstd_base: usize,
}

impl Decoders {
    fn new() -> Self {
        Self {
            out: vec![0; READ_LEN].into_boxed_slice(),
            spill: Vec::new(),
            inflate: None,
            #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
            ruzstd: None,
            #[cfg(feature = "zstd")]
            libzstd: None,
            #[cfg(feature = "zstd")]
            libzstd_base: 0,
        }
    }

    /// One message decoded with these decoders into `count` (zstd with
    /// the C library under feature `zstd`, else with `ruzstd`).
    fn decode<P: AsRef<[u8]>>(
        &mut self,
        encoding: Encoding,
        pieces: &[P],
        mut count: Count,
    ) -> Result<Count, DecompressError> {
        match encoding {
            Encoding::Gzip => self.gzip(pieces, &mut count),
            Encoding::Deflate => self.deflate(pieces, &mut count),
            #[cfg(feature = "zstd")]
            Encoding::Zstd => self.libzstd(pieces, &mut count),
            #[cfg(not(feature = "zstd"))]
            Encoding::Zstd => self.ruzstd(pieces, &mut count),
        }?;
        Ok(count)
    }
}

/// The running total, checked against the limit as tonic's limited buffer
/// checks each write; and the decoded bytes, when they are kept.
struct Count {
    total: u32,
    limit: u32,
    kept: Option<Vec<u8>>,
}

impl Count {
    /// Counts, keeps nothing.
    fn new(limit: u32) -> Self {
        Self {
            total: 0,
            limit,
            kept: None,
        }
    }

    /// Counts and keeps what is decoded.
    fn keeping(limit: u32) -> Self {
        Self {
            kept: Some(Vec::new()),
            ..Self::new(limit)
        }
    }

    /// A count for one part of the output (a zstd frame), up to `limit`,
    /// keeping its bytes if this one keeps: see [`append`](Self::append).
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    fn frame(&self, limit: u32) -> Self {
        Self {
            kept: self.kept.as_ref().map(|_| Vec::new()),
            ..Self::new(limit)
        }
    }

    /// Adds a part counted by [`frame`](Self::frame).
    #[cfg(any(not(feature = "zstd"), feature = "bench-internals"))]
    fn append(&mut self, part: Count) -> Result<(), DecompressError> {
        self.add_len(part.total as usize)?;
        if let (Some(kept), Some(part)) = (&mut self.kept, part.kept) {
            kept.extend_from_slice(&part);
        }
        Ok(())
    }

    /// Counts (and keeps, if keeping) `decoded`.
    #[inline]
    fn add(&mut self, decoded: &[u8]) -> Result<(), DecompressError> {
        self.add_len(decoded.len())?;
        if let Some(kept) = &mut self.kept {
            kept.extend_from_slice(decoded);
        }
        Ok(())
    }

    #[inline]
    fn add_len(&mut self, read: usize) -> Result<(), DecompressError> {
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
