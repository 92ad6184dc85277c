//! [`Evidence`]: what an event of a server RPC shows about its method,
//! for a method the server has not yet been seen to serve.

use crate::stats::RpcEvent;
use crate::wire::content_type::is_grpc;

/// What one event of an unproven server RPC shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Evidence {
    /// The server serves the method: the inner service read a request
    /// message (`InPayload`), or answered with gRPC response headers that
    /// are not trailers-only (`OutHeader`). Neither tonic's generated
    /// answer to an unknown method (trailers-only `UNIMPLEMENTED`, request
    /// unread) nor a layer refusing the call (trailers-only, or a plain
    /// HTTP error without gRPC's content type) does either.
    Served,
    /// The RPC ended without proving anything.
    Ended,
    /// Nothing either way.
    None,
}

impl Evidence {
    #[inline]
    pub(super) fn of(event: &RpcEvent<'_>) -> Self {
        match event {
            RpcEvent::InPayload(_) => Evidence::Served,
            RpcEvent::OutHeader(headers) if is_grpc(headers, false) => Evidence::Served,
            RpcEvent::End(_) => Evidence::Ended,
            _ => Evidence::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use http::header::CONTENT_TYPE;
    use http::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn only_grpc_response_headers_prove_the_method() {
        let mut grpc = HeaderMap::new();
        grpc.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        assert_eq!(Evidence::of(&RpcEvent::OutHeader(&grpc)), Evidence::Served);
        grpc.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
        assert_eq!(Evidence::of(&RpcEvent::OutHeader(&grpc)), Evidence::Served);
        let mut plain = HeaderMap::new();
        assert_eq!(Evidence::of(&RpcEvent::OutHeader(&plain)), Evidence::None);
        plain.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(Evidence::of(&RpcEvent::OutHeader(&plain)), Evidence::None);
        // Trailers-only answers are trailers, whatever they carry.
        assert_eq!(Evidence::of(&RpcEvent::OutTrailer(&grpc)), Evidence::None);
        assert_eq!(Evidence::of(&RpcEvent::InHeader(&grpc)), Evidence::None);
    }
}
