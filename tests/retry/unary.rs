//! grpc-go's unary retry tests (`TestRetryUnary`, `TestRetryThrottling`,
//! `TestMaxCallAttempts`, `TestNoRetry`), ported: a tonic server that
//! answers by the count of calls it has seen, a tonic client through
//! `RetryLayer`; then the call's deadline across attempts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer};
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::retry::{Retry, RetryConfig, RetryLayer, RetryPolicy};

/// A unary server whose `i`-th call (from 0) gets `answer(i)`.
pub(crate) struct Counted<F> {
    pub(crate) calls: AtomicU32,
    answer: F,
}

#[tonic::async_trait]
impl<F> EchoOverride for Counted<F>
where
    F: Fn(u32) -> Code + Send + Sync + 'static,
{
    async fn unary(&self, _: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        match (self.answer)(call) {
            Code::Ok => Ok(Response::new(EchoResponse::default())),
            code => Err(Status::new(code, "scripted")),
        }
    }

    async fn bidi(
        &self,
        _: Request<tonic::Streaming<EchoRequest>>,
    ) -> Result<Response<support::ResponseStream>, Status> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Err(Status::new((self.answer)(call), "scripted"))
    }
}

pub(crate) async fn serve<F>(answer: F) -> (SocketAddr, Arc<Counted<F>>)
where
    F: Fn(u32) -> Code + Send + Sync + 'static,
{
    let counted = Arc::new(Counted {
        calls: AtomicU32::new(0),
        answer,
    });
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(Arc::clone(&counted)))
            .serve_with_incoming(incoming),
    );
    (addr, counted)
}

pub(crate) async fn client(
    addr: SocketAddr,
    retry: RetryLayer,
) -> EchoClient<Retry<tonic::transport::Channel>> {
    EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(retry)
            .service(support::connect(addr).await),
    )
}

pub(crate) fn config(attempts: u32, codes: &str, extra: &str) -> String {
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "hotpath.echo.Echo"}}],
            "retryPolicy": {{"MaxAttempts": {attempts}, "InitialBackoff": ".01s",
            "MaxBackoff": ".01s", "BackoffMultiplier": 1.0,
            "RetryableStatusCodes": [{codes}]}}}}]{extra}}}"#
    )
}

pub(crate) async fn call(client: &mut EchoClient<Retry<tonic::transport::Channel>>) -> Code {
    match client.unary_echo(EchoRequest::default()).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

/// grpc-go's `TestRetryUnary` server: the answer to its `i`-th call.
pub(crate) fn retry_unary(i: u32) -> Code {
    match i {
        0 | 2 | 5 => Code::Ok,
        6 | 8 | 11 => Code::Internal,
        _ => Code::AlreadyExists,
    }
}

/// grpc-go's `TestRetryThrottling` server.
pub(crate) fn retry_throttling(i: u32) -> Code {
    match i {
        0 | 3 | 6 | 10 | 11 | 12 | 13 | 14 | 16 | 18 => Code::Ok,
        _ => Code::Unavailable,
    }
}

#[tokio::test]
async fn grpc_go_retry_unary_gives_the_same_codes_after_the_same_calls() {
    let (addr, server) = serve(retry_unary).await;
    let retry = RetryLayer::from_service_config(&config(4, r#""ALREADY_EXISTS""#, "")).unwrap();
    let mut client = client(addr, retry).await;
    for (want, count) in [
        (Code::Ok, 0),
        (Code::Ok, 2),
        (Code::Ok, 5),
        (Code::Internal, 6),
        (Code::Internal, 8),
        (Code::Internal, 11),
        (Code::AlreadyExists, 15),
    ] {
        assert_eq!(call(&mut client).await, want);
        assert_eq!(server.calls.load(Ordering::SeqCst), count + 1);
    }
}

#[tokio::test]
async fn grpc_go_retry_throttling_gives_the_same_codes_calls_and_tokens() {
    let (addr, server) = serve(retry_throttling).await;
    let retry = RetryLayer::from_service_config(&config(
        4,
        r#""UNAVAILABLE""#,
        r#", "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}"#,
    ))
    .unwrap();
    let mut client = client(addr, retry.clone()).await;
    // grpc-go's expectations, with the token counts its arithmetic gives
    // after each call.
    for (want, count, tokens) in [
        (Code::Ok, 0, 10.0),
        (Code::Ok, 3, 8.5),
        (Code::Ok, 6, 7.0),
        (Code::Unavailable, 8, 5.0),
        (Code::Unavailable, 9, 4.0),
        (Code::Ok, 10, 4.5),
        (Code::Ok, 11, 5.0),
        (Code::Ok, 12, 5.5),
        (Code::Ok, 13, 6.0),
        (Code::Ok, 14, 6.5),
        (Code::Ok, 16, 6.0),
        (Code::Unavailable, 17, 5.0),
    ] {
        assert_eq!(call(&mut client).await, want, "call up to {count}");
        assert_eq!(server.calls.load(Ordering::SeqCst), count + 1);
        assert_eq!(retry.retry_tokens(), Some(tokens), "after call {count}");
    }
}

#[tokio::test]
async fn grpc_go_max_call_attempts_caps_unary_and_streaming_calls() {
    // (the policy's maxAttempts, the channel's cap, attempts made)
    for (policy, cap, expected) in [(9, 4, 4), (9, 7, 7), (3, 10, 3), (8, 0, 5), (3, 0, 3)] {
        let (addr, server) = serve(|_| Code::Unavailable).await;
        let config = RetryConfig::from_json(&config(policy, r#""UNAVAILABLE""#, ""))
            .unwrap()
            .max_call_attempts(cap);
        let mut client = client(addr, RetryLayer::new(config)).await;
        let (_tx, rx) = tokio::sync::mpsc::channel::<EchoRequest>(1);
        let status = client
            .bidirectional_streaming_echo(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            server.calls.load(Ordering::SeqCst),
            expected,
            "streaming, {policy}/{cap}"
        );
        assert_eq!(call(&mut client).await, Code::Unavailable);
        assert_eq!(
            server.calls.load(Ordering::SeqCst),
            2 * expected,
            "unary, {policy}/{cap}"
        );
    }
}

#[tokio::test]
async fn without_a_policy_for_the_method_nothing_is_retried() {
    let (addr, server) = serve(|_| Code::Unavailable).await;
    let other = RetryPolicy::builder()
        .max_attempts(4)
        .initial_backoff(Duration::from_millis(10))
        .max_backoff(Duration::from_millis(10))
        .backoff_multiplier(1.0)
        .retryable_code(Code::Unavailable)
        .build()
        .unwrap();
    let config = RetryConfig::new().method("hotpath.echo.Echo", "ServerStreamingEcho", other);
    let mut client = client(addr, RetryLayer::new(config)).await;
    assert_eq!(call(&mut client).await, Code::Unavailable);
    assert_eq!(server.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_caller_s_deadline_covers_every_attempt_and_backoff() {
    let (addr, server) = serve(|_| Code::Unavailable).await;
    // Backoffs of 150 ms: a 200 ms deadline allows two attempts, and the
    // second backoff ends the call with DEADLINE_EXCEEDED.
    let retry = RetryLayer::from_service_config(
        r#"{"methodConfig": [{"name": [{"service": "hotpath.echo.Echo"}],
            "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.15s",
            "maxBackoff": "0.15s", "backoffMultiplier": 1,
            "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
    )
    .unwrap();
    let mut client = client(addr, retry).await;
    let mut request = Request::new(EchoRequest::default());
    request.set_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let status = client.unary_echo(request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // At least the first backoff (120 ms after jitter) passed; the
    // deadline ended the call, not the attempts (5 would take ≥ 480 ms).
    assert!(started.elapsed() >= Duration::from_millis(120));
    let calls = server.calls.load(Ordering::SeqCst);
    assert!((1..=2).contains(&calls), "{calls} attempts in 200 ms");
}
