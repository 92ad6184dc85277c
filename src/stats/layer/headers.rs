//! Reading the compression headers the layer needs (`grpc-encoding`,
//! `grpc-accept-encoding`), without building a `MetadataMap` (which copies
//! the whole `HeaderMap`, as tonic's `Status::from_header_map` does). The
//! other gRPC headers are read by `crate::wire`.

use http::{HeaderMap, HeaderName};

use crate::wire::headers::first_value;

// Pre-built names: a lookup by `&HeaderName` skips parsing the name.
pub(crate) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
pub(crate) const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");

/// The compressed encodings a tonic client accepts in responses: those it
/// lists in its request's `grpc-accept-encoding` (tonic sends its
/// `accept_compressed` set there, and nothing when the set is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AcceptedEncodings(u8);

impl AcceptedEncodings {
    /// The encodings tonic can decompress, by bit.
    const KNOWN: [&'static [u8]; 3] = [b"gzip", b"deflate", b"zstd"];

    /// The encodings the request's headers list.
    #[inline]
    pub(crate) fn of_request(headers: &HeaderMap) -> Self {
        match first_value(headers, &GRPC_ACCEPT_ENCODING) {
            None => Self(0),
            Some(_) => Self::listed(headers),
        }
    }

    #[cold]
    fn listed(headers: &HeaderMap) -> Self {
        let mut bits = 0;
        for value in headers.get_all(&GRPC_ACCEPT_ENCODING) {
            for listed in value.as_bytes().split(|&b| b == b',') {
                if let Some(bit) = Self::bit(listed.trim_ascii()) {
                    bits |= bit;
                }
            }
        }
        Self(bits)
    }

    fn bit(encoding: &[u8]) -> Option<u8> {
        Self::KNOWN
            .iter()
            .position(|known| *known == encoding)
            .map(|index| 1 << index)
    }

    /// Whether a response body compressed with the `grpc-encoding`
    /// `encoding` is accepted: `identity`, or a listed encoding tonic
    /// knows (tonic's `CompressionEncoding::from_encoding_header`).
    pub(crate) fn accepts(self, encoding: &[u8]) -> bool {
        encoding == b"identity" || Self::bit(encoding).is_some_and(|bit| self.0 & bit != 0)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn accept_encoding_lists() {
        let mut headers = HeaderMap::new();
        let none = AcceptedEncodings::of_request(&headers);
        assert!(!none.accepts(b"gzip"));
        assert!(none.accepts(b"identity"));
        let listed = HeaderValue::from_static("gzip,zstd, identity");
        headers.insert(GRPC_ACCEPT_ENCODING, listed);
        let listed = AcceptedEncodings::of_request(&headers);
        assert!(listed.accepts(b"gzip"));
        assert!(listed.accepts(b"zstd"));
        assert!(!listed.accepts(b"deflate"));
        assert!(!listed.accepts(b"snappy"));
    }
}
