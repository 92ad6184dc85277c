//! gRPC retries for tonic clients (gRFC A6), as grpc-go's client makes
//! them: [`RetryLayer`], configured from the same service config JSON
//! grpc-go takes ([`RetryConfig::from_json`]) or by hand
//! ([`RetryPolicy::builder`]).
//!
//! tonic has no retries (tonic#733: an `http::Request` is not `Clone`).
//! A loop around a call cannot retry a stream, ignores the server's
//! pushback and has no budget. This layer keeps a call's encoded
//! messages (shared `Bytes`) and makes each attempt a fresh request:
//!
//! - **When**: an attempt that fails with one of its method's
//!   `retryableStatusCodes` *before response headers arrive* (a
//!   trailers-only answer, a proxy's bare HTTP status, a transport error)
//!   is tried again, up to `maxAttempts` (capped at 5,
//!   [`RetryConfig::max_call_attempts`]). Response headers commit the
//!   call: what follows them is the caller's, as in grpc-go. Unary and
//!   streaming calls alike.
//! - **Backoff**: `min(initialBackoff × backoffMultiplier^n, maxBackoff)`
//!   times a random factor in [0.8, 1.2) (grpc-go's jitter), *n* counted
//!   since the server's last pushback.
//! - **Pushback**: a server's `grpc-retry-pushback-ms` (this crate's
//!   limiters send one on every refusal) replaces the backoff; a negative,
//!   malformed or repeated one ends the call and costs a budget token.
//! - **Budget** ([`RetryThrottling`]): `maxTokens` and `tokenRatio`; each
//!   failure with a retryable code takes a token, each call that ends `OK`
//!   gives back `tokenRatio`, and at or below half the tokens nothing is
//!   retried.
//! - **Headers**: `grpc-previous-rpc-attempts` on each retry (transparent
//!   retries not counted), and the `grpc-timeout` that remains of the
//!   call's: the caller's deadline covers every attempt and backoff, and
//!   a backoff past it ends the call with `DEADLINE_EXCEEDED`.
//! - **Transparent retries**: a first attempt the server never saw (a
//!   `REFUSED_STREAM` reset, a graceful GOAWAY that left the stream out, a
//!   request hyper never sent) is sent again at once, with or without a
//!   policy, and takes no token.
//! - **Memory**: a call keeps at most
//!   [`per_call_buffer`](RetryLayer::per_call_buffer) bytes (256 KiB), and
//!   the channel's calls at most
//!   [`per_channel_buffer`](RetryLayer::per_channel_buffer) together if
//!   set; past either, the call commits to its current attempt.
//! - **Attempts seen**: each attempt carries a
//!   [`CallAttempt`](crate::stats::CallAttempt) in its extensions; a
//!   [`CombinedLayer::client`](crate::stats::CombinedLayer::client) below
//!   this layer hands it to its handlers
//!   ([`RpcInfo::attempt`](crate::stats::RpcInfo::attempt)), so that
//!   `OtelMetrics` records A66's attempt instruments per attempt and
//!   `grpc.client.call.duration` once per call, and `OtelTracing` A72's
//!   attempt spans under one call span.
//!
//! Not here yet: `hedgingPolicy` (ignored, as grpc-go ignores it).
//!
//! ```no_run
//! use tonic_hotpath::retry::RetryLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let retry = RetryLayer::from_service_config(r#"{"methodConfig": [{
//!     "name": [{"service": "echo.Echo"}],
//!     "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s",
//!         "maxBackoff": "1s", "backoffMultiplier": 2,
//!         "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}}]}"#)?;
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
//!     .connect()
//!     .await?;
//! let channel = tower::ServiceBuilder::new().layer(retry).service(channel);
//! // let mut client = EchoClient::new(channel);
//! # let _ = channel;
//! # Ok(())
//! # }
//! ```

mod body;
mod config;
mod decision;
mod error;
mod future;
mod layer;
mod policy;
mod response;
mod throttle;

pub use config::RetryConfig;
pub use error::{RetryConfigError, RetryConfigErrorKind};
pub use future::ResponseFuture;
pub use layer::{Retry, RetryLayer};
pub use policy::{RetryPolicy, RetryPolicyBuilder};
pub use response::ResponseBody;
pub use throttle::RetryThrottling;
