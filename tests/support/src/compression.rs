//! Compressed gRPC messages as tonic makes them, and tonic's verdict on
//! them, for `stats::compression`'s tests and bench.
//!
//! Two oracles: [`tonic_verdict`] runs tonic's own decoder
//! (`tonic::codec::Streaming` over a one-message body), and
//! [`reference_verdict`] is a copy of what it runs (tonic 0.14.9
//! `codec/compression.rs` `decompress`), which also takes messages longer on
//! the wire than the limit (tonic rejects those before decompressing).

use std::future::Future;
use std::io::{self, Read};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::read::{GzDecoder, GzEncoder, ZlibDecoder, ZlibEncoder};
use tonic::Status;
use tonic::codec::{CompressionEncoding, DecodeBuf, Decoder, Streaming};
use tonic_hotpath::stats::compression::{DecompressError, Encoding};

/// Every encoding.
pub const ENCODINGS: [Encoding; 3] = [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd];

/// tonic's default decode limit.
pub const DEFAULT_LIMIT: u32 = 4 * 1024 * 1024;

/// What a decoder says about one compressed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted: the uncompressed length.
    Len(u32),
    /// `INTERNAL`, with the decoder's error text.
    Corrupt(String),
    /// `RESOURCE_EXHAUSTED`.
    TooLarge,
}

impl Verdict {
    /// The verdict without the error text.
    pub fn kind(&self) -> Verdict {
        match self {
            Verdict::Corrupt(_) => Verdict::Corrupt(String::new()),
            other => other.clone(),
        }
    }
}

impl From<Result<u32, DecompressError>> for Verdict {
    fn from(result: Result<u32, DecompressError>) -> Self {
        match result {
            Ok(len) => Verdict::Len(len),
            Err(DecompressError::Corrupt(error)) => Verdict::Corrupt(error.to_string()),
            Err(DecompressError::TooLarge { .. }) => Verdict::TooLarge,
        }
    }
}

/// Compresses `data` as tonic 0.14.9 does (`codec/compression.rs`
/// `compress`): gzip and zlib at level 6, zstd at the default level with
/// the streaming encoder and no pledged size, copied with `io::copy` into
/// a `BytesMut` writer.
pub fn compress(encoding: Encoding, data: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new().writer();
    match encoding {
        Encoding::Gzip => {
            io::copy(
                &mut GzEncoder::new(data, flate2::Compression::new(6)),
                &mut out,
            )
            .unwrap();
        }
        Encoding::Deflate => {
            io::copy(
                &mut ZlibEncoder::new(data, flate2::Compression::new(6)),
                &mut out,
            )
            .unwrap();
        }
        Encoding::Zstd => {
            io::copy(
                &mut zstd::stream::read::Encoder::new(data, zstd::DEFAULT_COMPRESSION_LEVEL)
                    .unwrap(),
                &mut out,
            )
            .unwrap();
        }
    }
    out.into_inner().to_vec()
}

/// What tonic does per compressed message (`decompress`, called from
/// `decode_chunk`): a decoder over the message, copied into a `BytesMut`
/// limited to `limit`, reserved as tonic reserves it (twice the compressed
/// length, rounded up to the 8 KiB buffer size, at most the limit).
/// Returns the decompressed buffer, or tonic's verdict on the error.
pub fn tonic_decompress(
    encoding: Encoding,
    compressed: &[u8],
    limit: u32,
    out: &mut BytesMut,
) -> Result<(), Verdict> {
    const BUFFER_SIZE: usize = 8 * 1024;
    let limit = limit as usize;
    out.clear();
    let capacity = limit.min(((compressed.len() * 2 / BUFFER_SIZE) + 1) * BUFFER_SIZE);
    out.reserve(capacity);
    let mut writer = out.limit(limit).writer();
    let copied = match encoding {
        Encoding::Gzip => io::copy(&mut GzDecoder::new(compressed), &mut writer),
        Encoding::Deflate => io::copy(&mut ZlibDecoder::new(compressed), &mut writer),
        Encoding::Zstd => match zstd::stream::read::Decoder::new(compressed) {
            Ok(mut decoder) => io::copy(&mut decoder, &mut writer),
            Err(error) => Err(error),
        },
    };
    match copied {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::WriteZero => Err(Verdict::TooLarge),
        Err(error) => Err(Verdict::Corrupt(error.to_string())),
    }
}

/// [`tonic_decompress`]'s verdict.
pub fn reference_verdict(encoding: Encoding, compressed: &[u8], limit: u32) -> Verdict {
    let mut out = BytesMut::new();
    match tonic_decompress(encoding, compressed, limit, &mut out) {
        Ok(()) => Verdict::Len(out.len() as u32),
        Err(verdict) => verdict,
    }
}

/// Counts the bytes of each decoded message.
pub struct LenDecoder;

impl Decoder for LenDecoder {
    type Item = u32;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<u32>, Status> {
        let len = src.remaining();
        src.advance(len);
        Ok(Some(len as u32))
    }
}

/// tonic's own verdict: its request decoder (`Streaming`) reading one
/// message with the compressed flag set, `grpc-encoding: encoding`, and
/// `limit` as the maximum decoding message size. `None` when the message is
/// longer on the wire than `limit` (tonic then rejects the length prefix,
/// `OUT_OF_RANGE`, before decompressing).
pub fn tonic_verdict(encoding: Encoding, compressed: &[u8], limit: u32) -> Option<Verdict> {
    if compressed.len() > limit as usize {
        return None;
    }
    let mut wire = Vec::with_capacity(compressed.len() + 5);
    wire.push(1);
    wire.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    wire.extend_from_slice(compressed);
    let body = http_body_util::Full::new(Bytes::from(wire));
    let encoding = match encoding {
        Encoding::Gzip => CompressionEncoding::Gzip,
        Encoding::Deflate => CompressionEncoding::Deflate,
        Encoding::Zstd => CompressionEncoding::Zstd,
    };
    let mut streaming =
        Streaming::new_request(LenDecoder, body, Some(encoding), Some(limit as usize));
    let message = now(streaming.message());
    Some(match message {
        Ok(Some(len)) => Verdict::Len(len),
        Ok(None) => panic!("no message decoded"),
        Err(status) => match status.code() {
            tonic::Code::ResourceExhausted => Verdict::TooLarge,
            tonic::Code::Internal => {
                let text = status.message();
                let text = text.strip_prefix("Error decompressing: ").unwrap_or(text);
                let text = text.strip_suffix(", while sending request").unwrap_or(text);
                Verdict::Corrupt(text.to_owned())
            }
            code => panic!("unexpected status {code:?}: {status:?}"),
        },
    })
}

/// Polls a future that never waits (the body is in memory) to completion.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an in-memory body was pending"),
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

/// `len` bytes that look like a serialized protobuf message: repeated
/// records of field tags, varints (ids, counts, timestamps), short ASCII
/// strings from a small vocabulary with numbers in them, and a few random
/// bytes (hashes). gzip compresses it about 2 times (see the bench's
/// first lines), as it does typical payloads.
pub fn protobuf_like(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "user",
        "tenant",
        "order",
        "status",
        "pending",
        "shipped",
        "eu-west-1",
        "us-east-2",
        "checkout",
        "inventory",
        "price",
        "currency",
    ];
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 64);
    let varint = |out: &mut Vec<u8>, mut value: u64| {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    };
    let mut timestamp = 1_700_000_000_000u64;
    while out.len() < len {
        // field 1: id (varint); field 2: name (string); field 3: timestamp;
        // field 4: amount; field 5: a 16-byte hash.
        out.push(0x08);
        varint(&mut out, 100_000 + rng.below(2_000));
        out.push(0x12);
        let word = WORDS[rng.below(WORDS.len() as u64) as usize];
        let name = format!("{word}-{}", rng.below(100));
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(0x18);
        timestamp += rng.below(1_000);
        varint(&mut out, timestamp);
        out.push(0x20);
        varint(&mut out, 100 * rng.below(500));
        if rng.below(8) == 0 {
            out.push(0x2a);
            out.push(16);
            out.extend_from_slice(&rng.bytes(16));
        }
    }
    out.truncate(len);
    out
}

/// Reads a whole reader (for encoders other than tonic's).
pub fn read_all(mut reader: impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    reader.read_to_end(&mut out).unwrap();
    out
}
