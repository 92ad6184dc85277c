//! What a raw HTTP/2 peer can do to an attempt: refuse its stream
//! (`REFUSED_STREAM`: the server never saw it, retried transparently,
//! with or without a policy), or answer as a proxy with a bare HTTP
//! status (read as the status's code, retried when that code is).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use support::{EchoClient, EchoRequest};
use tonic::Code;
use tonic_hotpath::retry::{RetryConfig, RetryLayer, RetryPolicy};

/// What the raw server does with a stream.
#[derive(Debug, Clone, Copy)]
enum Action {
    Refuse,
    Ok,
    Bare(u16),
}

/// The streams the server saw: each one's `grpc-previous-rpc-attempts`.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

async fn serve(action: impl Fn(usize) -> Action + Send + Sync + 'static) -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let action = Arc::new(action);
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (action, seen) = (Arc::clone(&action), Arc::clone(&record));
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                let mut open = Vec::new();
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    let index = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(
                            request
                                .headers()
                                .get("grpc-previous-rpc-attempts")
                                .map(|v| v.to_str().unwrap().to_owned()),
                        );
                        seen.len() - 1
                    };
                    match action(index) {
                        Action::Refuse => respond.send_reset(h2::Reason::REFUSED_STREAM),
                        Action::Bare(status) => {
                            let mut response = http::Response::new(());
                            *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                            let _ = respond.send_response(response, true);
                        }
                        Action::Ok => {
                            let response = http::Response::builder()
                                .header("content-type", "application/grpc")
                                .body(())
                                .unwrap();
                            let Ok(mut stream) = respond.send_response(response, false) else {
                                continue;
                            };
                            // One empty message, then status 0.
                            let _ = stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                            let mut trailers = http::HeaderMap::new();
                            trailers.insert("grpc-status", "0".parse().unwrap());
                            let _ = stream.send_trailers(trailers);
                            open.push(stream);
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn unavailable_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(5))
        .backoff_multiplier(1.0)
        .retryable_code(Code::Unavailable)
        .build()
        .unwrap()
}

async fn call(addr: SocketAddr, config: RetryConfig) -> Result<(), tonic::Status> {
    let channel = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(config))
        .service(support::connect(addr).await);
    EchoClient::new(channel)
        .unary_echo(EchoRequest {
            message: "m".into(),
        })
        .await
        .map(drop)
}

#[tokio::test]
async fn a_refused_first_stream_is_sent_again_without_a_policy_and_not_counted() {
    let (addr, seen) = serve(|index| {
        if index == 0 {
            Action::Refuse
        } else {
            Action::Ok
        }
    })
    .await;
    call(addr, RetryConfig::new()).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [None, None],
        "transparent: no previous attempts"
    );
}

#[tokio::test]
async fn only_the_first_attempt_is_retried_transparently() {
    let (addr, seen) = serve(|_| Action::Refuse).await;
    let status = call(addr, RetryConfig::new()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_transparent_retry_is_not_one_of_the_policy_s_attempts() {
    let (addr, seen) = serve(|_| Action::Refuse).await;
    let config = RetryConfig::new().default_policy(unavailable_policy());
    let status = call(addr, config).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    // One transparent retry, then the policy's 3 attempts; the refused
    // stream's code (UNAVAILABLE) is retryable under it.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [None, None, Some("1".into()), Some("2".into())]);
}

#[tokio::test]
async fn a_proxy_s_bare_503_is_unavailable_and_retried_under_the_policy() {
    let (addr, seen) = serve(|index| {
        if index < 2 {
            Action::Bare(503)
        } else {
            Action::Ok
        }
    })
    .await;
    let config = RetryConfig::new().default_policy(unavailable_policy());
    call(addr, config).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
    // A bare 404 is UNIMPLEMENTED: not retried.
    let (addr, seen) = serve(|_| Action::Bare(404)).await;
    let config = RetryConfig::new().default_policy(unavailable_policy());
    let status = call(addr, config).await.unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(seen.lock().unwrap().len(), 1);
}
