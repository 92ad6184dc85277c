//! The 64 KiB gzip-compressed unary call of the otel and binlog benches:
//! echo routes that accept gzip, and the request.
//!
//! Include with `#[path = "gzip_call/mod.rs"] mod gzip_call;` beside
//! `support` and `stats_harness`.

use std::io::Write as _;
use std::sync::LazyLock;

use bytes::Bytes;
use flate2::write::GzEncoder;
use http::HeaderValue;
use prost::Message as _;
use tonic::codec::CompressionEncoding;
use tonic::service::Routes;

use support::stats_harness::unary_request;

/// The echo routes, accepting gzip requests, under `layer`.
pub fn gzip_routes<L: tower::Layer<Routes>>(layer: L) -> L::Service {
    layer.layer(Routes::new(
        support::EchoServer::new(support::EchoService).accept_compressed(CompressionEncoding::Gzip),
    ))
}

/// The request body of [`gzip_request`]: one `EchoRequest` of 64 KiB of
/// text-like bytes (words from a small vocabulary in a pseudo-random
/// order; gzip takes it to about a third), gzip-compressed as tonic does.
pub static GZIP_BODY: LazyLock<Bytes> = LazyLock::new(|| {
    const WORDS: [&str; 16] = [
        "alpha", "beta", "gamma", "delta", "tenant", "ingester", "push", "sample", "series",
        "label", "value", "query", "range", "chunk", "store", "write",
    ];
    let mut text = String::with_capacity(64 * 1024);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    while text.len() < 64 * 1024 - 16 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        text.push_str(WORDS[(seed >> 60) as usize]);
        text.push(' ');
    }
    let message = support::EchoRequest { message: text }.encode_to_vec();
    let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&message).expect("gzip into memory");
    let compressed = gzip.finish().expect("gzip into memory");
    let mut body = Vec::with_capacity(5 + compressed.len());
    body.push(1);
    body.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    body.extend_from_slice(&compressed);
    Bytes::from(body)
});

/// The unary echo request with the [`GZIP_BODY`] (the body passed in is
/// not used) and `grpc-encoding: gzip`.
pub fn gzip_request(_: &Bytes) -> http::Request<tonic::body::Body> {
    let mut request = unary_request(&GZIP_BODY);
    request
        .headers_mut()
        .insert("grpc-encoding", HeaderValue::from_static("gzip"));
    request
}
