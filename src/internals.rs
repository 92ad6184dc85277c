//! Crate-private parsers of a peer's bytes, public (hidden) for the crate's
//! own fuzz targets (`fuzz/`) and their corpus replay (`tests/fuzz_corpus`).
//! Feature `bench-internals`: not for users, no stability promise. Each
//! function is a thin wrapper over the one the layers call.

#[cfg(any(
    feature = "metadata",
    feature = "otel",
    feature = "binlog",
    feature = "orca"
))]
pub use wire::*;

#[cfg(any(
    feature = "metadata",
    feature = "otel",
    feature = "binlog",
    feature = "orca"
))]
mod wire {
    /// A `-bin` value's bytes base64-encoded, as every part sends them
    /// (standard alphabet, no padding).
    pub fn base64_encode(input: &[u8]) -> Vec<u8> {
        crate::wire::base64::base64_encode_no_pad(input)
    }

    /// A `-bin` value decoded, as every part reads it (padded or not);
    /// `None` where it is not base64.
    pub fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
        crate::wire::base64::base64_decode(input)
    }
}

#[cfg(feature = "stats")]
pub use stats::*;

#[cfg(feature = "stats")]
mod stats {
    use std::ops::Range;
    use std::time::Duration;

    use http::HeaderMap;

    use crate::stats::compression::{DecompressError, Encoding};
    use crate::stats::frame::{FrameDecoder, FrameError, FrameEvent, FrameHeader};
    use crate::stats::layer::headers;

    /// `grpc-timeout`, as the layer reads it.
    pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
        crate::wire::status::parse_timeout(value)
    }

    /// `grpc-message`'s percent-decoding, as the layer reads it.
    pub fn percent_decode(encoded: &[u8]) -> String {
        crate::wire::status::percent_decode(encoded)
    }

    /// Whether `headers` are a gRPC request's or response's (`content-type`;
    /// grpc-web is not, for the stats layer).
    pub fn is_grpc(headers: &HeaderMap) -> bool {
        crate::wire::content_type::is_grpc(headers, false)
    }

    /// Whether a request with `headers` accepts a response compressed with
    /// the `grpc-encoding` `encoding` (its `grpc-accept-encoding`).
    pub fn accepts_encoding(headers: &HeaderMap, encoding: &[u8]) -> bool {
        headers::AcceptedEncodings::of_request(headers).accepts(encoding)
    }

    /// One compressed message, decompressed as the layer does for a
    /// handler that asks for message bytes.
    pub fn decompress(
        encoding: Encoding,
        pieces: &[&[u8]],
        limit: u32,
    ) -> Result<Vec<u8>, DecompressError> {
        crate::stats::compression::decompress(encoding, pieces, limit)
    }

    /// A frame event, as [`push_with_bodies`] reports it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum FrameStep {
        /// Bytes of the message with this header: a range of the chunk.
        Body(FrameHeader, Range<usize>),
        /// The message with this header is complete.
        Message(FrameHeader),
    }

    /// [`FrameDecoder::push`] reporting message bytes too, as the layer
    /// drives it when a handler asks for message data.
    pub fn push_with_bodies(
        decoder: &mut FrameDecoder,
        chunk: &[u8],
        mut on_step: impl FnMut(FrameStep),
    ) -> Result<(), FrameError> {
        decoder.push_with_bodies(chunk, |event| {
            on_step(match event {
                FrameEvent::Body(header, range) => FrameStep::Body(header, range),
                FrameEvent::Message(header) => FrameStep::Message(header),
            })
        })
    }

    /// The layer's fast path for a chunk holding exactly one message.
    pub fn single_message(decoder: &FrameDecoder, chunk: &[u8]) -> Option<FrameHeader> {
        decoder.single_message(chunk)
    }

    /// The layer's fast path for a chunk inside a message.
    pub fn skip_inside_message(decoder: &mut FrameDecoder, len: usize) -> Option<FrameHeader> {
        decoder.skip_inside_message(len)
    }
}

#[cfg(feature = "binlog")]
pub use binlog::*;

#[cfg(feature = "binlog")]
mod binlog {
    use bytes::Bytes;
    use http::HeaderMap;

    use prost::Message as _;

    use crate::binlog::metadata::LoggedMetadata;
    use crate::binlog::proto::Metadata;

    /// Headers as a binary log entry's metadata (`-bin` values decoded),
    /// cut by grpc-go's truncation rule at `limit` bytes (`u64::MAX`: no
    /// limit), encoded as the log encodes it and decoded back; whether
    /// entries were cut.
    ///
    /// # Panics
    ///
    /// If the encoding is not as long as it was measured, or does not
    /// decode: a bug for the fuzzer to find.
    pub fn binlog_metadata(headers: &HeaderMap, limit: u64) -> (Metadata, bool) {
        let logged = LoggedMetadata::new(headers, limit);
        let mut encoded = Vec::new();
        logged.encode(&mut encoded);
        assert_eq!(encoded.len(), logged.encoded_len(), "measured length");
        let metadata = Metadata::decode(encoded.as_slice()).expect("the encoding decodes");
        (metadata, logged.truncated())
    }

    /// `grpc-status-details-bin`, decoded as the binary log does.
    pub fn binlog_status_details(headers: &HeaderMap) -> Bytes {
        crate::binlog::metadata::status_details(headers)
    }
}
