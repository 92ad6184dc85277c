//! grpc-go's `TestRetryStreaming`, ported: the same server scripts and
//! client steps, a tonic client through `RetryLayer` (maxAttempts 4,
//! backoff 10 ms, `UNAVAILABLE` retryable, a 200-byte per-call buffer).

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::EchoClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic_hotpath::retry::RetryLayer;

use crate::script::{Script, ServerOp, serve};

/// One client step (grpc-go's `cReq`, `cRes`, ...).
#[derive(Debug, Clone)]
pub(crate) enum ClientOp {
    Req(String),
    Res(String),
    Err(Code),
    CloseSend,
    GetTime,
    CheckElapsed(Duration),
}

pub(crate) const CONFIG: &str = r#"{"methodConfig": [{
    "name": [{"service": "hotpath.echo.Echo"}],
    "waitForReady": true,
    "retryPolicy": {"MaxAttempts": 4, "InitialBackoff": ".01s", "MaxBackoff": ".01s",
        "BackoffMultiplier": 1.0, "RetryableStatusCodes": ["UNAVAILABLE"]}}]}"#;

fn s(text: &str) -> String {
    text.to_owned()
}

fn large() -> String {
    "x".repeat(500)
}

pub(crate) fn cases() -> Vec<(&'static str, Vec<ServerOp>, Vec<ClientOp>)> {
    use ClientOp as C;
    use ServerOp as S;
    vec![
        (
            "Non-retryable error code",
            vec![S::Req(s("1")), S::Err(Code::Internal)],
            vec![C::Req(s("1")), C::Err(Code::Internal)],
        ),
        (
            "One retry necessary",
            vec![
                S::Req(s("1")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Attempts(1),
                S::Res(s("1")),
            ],
            vec![C::Req(s("1")), C::Res(s("1")), C::Err(Code::Ok)],
        ),
        (
            "Exceed max attempts (4); check attempts header on server",
            vec![
                S::Req(s("1")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Attempts(1),
                S::Err(Code::Unavailable),
                S::Attempts(2),
                S::Req(s("1")),
                S::Err(Code::Unavailable),
                S::Attempts(3),
                S::Req(s("1")),
                S::Err(Code::Unavailable),
            ],
            vec![C::Req(s("1")), C::Err(Code::Unavailable)],
        ),
        (
            "Multiple requests",
            vec![
                S::Req(s("1")),
                S::Req(s("2")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Req(s("2")),
                S::Res(s("5")),
            ],
            vec![
                C::Req(s("1")),
                C::Req(s("2")),
                C::Res(s("5")),
                C::Err(Code::Ok),
            ],
        ),
        (
            "Multiple successive requests",
            vec![
                S::Req(s("1")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Req(s("2")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Req(s("2")),
                S::Req(s("3")),
                S::Res(s("5")),
            ],
            vec![
                C::Req(s("1")),
                C::Req(s("2")),
                C::Req(s("3")),
                C::Res(s("5")),
                C::Err(Code::Ok),
            ],
        ),
        (
            "No retry after receiving",
            vec![
                S::Req(s("1")),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Res(s("3")),
                S::Err(Code::Unavailable),
            ],
            vec![C::Req(s("1")), C::Res(s("3")), C::Err(Code::Unavailable)],
        ),
        (
            "No retry after header",
            vec![S::Req(s("1")), S::Hdr, S::Err(Code::Unavailable)],
            vec![C::Req(s("1")), C::Err(Code::Unavailable)],
        ),
        (
            "Replaying close send",
            vec![
                S::Req(s("1")),
                S::Req(s("2")),
                S::CloseSend,
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Req(s("2")),
                S::CloseSend,
                S::Res(s("1")),
                S::Res(s("3")),
                S::Res(s("5")),
            ],
            vec![
                C::Req(s("1")),
                C::Req(s("2")),
                C::CloseSend,
                C::Res(s("1")),
                C::Res(s("3")),
                C::Res(s("5")),
                C::Err(Code::Ok),
            ],
        ),
        (
            "Negative server pushback - no retry",
            vec![S::Req(s("1")), S::Pushback("-1"), S::Err(Code::Unavailable)],
            vec![C::Req(s("1")), C::Err(Code::Unavailable)],
        ),
        (
            "Non-numeric server pushback - no retry",
            vec![
                S::Req(s("1")),
                S::Pushback("xxx"),
                S::Err(Code::Unavailable),
            ],
            vec![C::Req(s("1")), C::Err(Code::Unavailable)],
        ),
        (
            "Multiple server pushback values - no retry",
            vec![
                S::Req(s("1")),
                S::Pushback("100"),
                S::Pushback("10"),
                S::Err(Code::Unavailable),
            ],
            vec![C::Req(s("1")), C::Err(Code::Unavailable)],
        ),
        (
            "1s server pushback - delayed retry",
            vec![
                S::Req(s("1")),
                S::Pushback("1000"),
                S::Err(Code::Unavailable),
                S::Req(s("1")),
                S::Res(s("2")),
            ],
            vec![
                C::GetTime,
                C::Req(s("1")),
                C::Res(s("2")),
                C::CheckElapsed(Duration::from_secs(1)),
                C::Err(Code::Ok),
            ],
        ),
        (
            "Overflowing buffer - no retry",
            vec![S::Req(large()), S::Err(Code::Unavailable)],
            vec![C::Req(large()), C::Err(Code::Unavailable)],
        ),
    ]
}

/// The client side of one case: requests go out through a channel the
/// call reads; the call starts (and waits for response headers) at the
/// first step that needs the answer.
pub(crate) async fn run_client(
    client: &mut EchoClient<tonic_hotpath::retry::Retry<tonic::transport::Channel>>,
    ops: Vec<ClientOp>,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel(16);
    let mut tx = Some(tx);
    let mut rx = Some(rx);
    let mut stream = None;
    let mut started = Instant::now();
    for op in ops {
        match op {
            ClientOp::Req(message) => {
                let sender = tx.as_ref().ok_or("send after close")?;
                sender
                    .send(support::EchoRequest { message })
                    .await
                    .map_err(|e| e.to_string())?;
            }
            ClientOp::CloseSend => drop(tx.take()),
            ClientOp::GetTime => started = Instant::now(),
            ClientOp::CheckElapsed(at_least) => {
                let elapsed = started.elapsed();
                if elapsed < at_least {
                    return Err(format!("elapsed {elapsed:?}, want at least {at_least:?}"));
                }
            }
            ClientOp::Res(_) | ClientOp::Err(_) => {
                if stream.is_none() {
                    let requests = ReceiverStream::new(rx.take().ok_or("started twice")?);
                    match client.bidirectional_streaming_echo(requests).await {
                        Ok(response) => stream = Some(response.into_inner()),
                        Err(status) => {
                            return match op {
                                ClientOp::Err(code) if status.code() == code => Ok(()),
                                _ => Err(format!("call: {status:?}, want {op:?}")),
                            };
                        }
                    }
                }
                let received = stream.as_mut().expect("started").message().await;
                match (&op, received) {
                    (ClientOp::Res(want), Ok(Some(got))) if got.message == *want => {}
                    (ClientOp::Err(Code::Ok), Ok(None)) => {}
                    (ClientOp::Err(code), Err(status)) if status.code() == *code => {}
                    (_, other) => return Err(format!("Recv() = {other:?}, want {op:?}")),
                }
            }
        }
    }
    Ok(())
}

/// The tonic client of these scenarios: grpc-go's test channel settings
/// (its `MaxRetryRPCBufferSize(200)` as the per-call buffer).
pub(crate) async fn rust_client(
    addr: std::net::SocketAddr,
) -> EchoClient<tonic_hotpath::retry::Retry<tonic::transport::Channel>> {
    let retry = RetryLayer::from_service_config(CONFIG)
        .unwrap()
        .per_call_buffer(200);
    EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(retry)
            .service(support::connect(addr).await),
    )
}

#[tokio::test]
async fn grpc_go_retry_streaming_scenarios_give_the_same_attempts() {
    let script = Arc::new(Script::default());
    let addr = serve(Arc::clone(&script)).await;
    let mut client = rust_client(addr).await;
    for (description, server_ops, client_ops) in cases() {
        let expected_ops = server_ops.len();
        script.set(server_ops).await;
        let outcome = tokio::time::timeout(support::PATIENCE, run_client(&mut client, client_ops))
            .await
            .unwrap_or_else(|_| Err("timed out".to_owned()));
        assert_eq!(outcome, Ok(()), "{description}");
        // Every server step ran: the server saw each attempt grpc-go's
        // client makes, no more. (The call may be answered before the
        // server's task releases the script: wait for it.)
        let deadline = support::deadline();
        while script.left().await != 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            script.left().await,
            0,
            "{description}: {expected_ops} server steps"
        );
    }
}
