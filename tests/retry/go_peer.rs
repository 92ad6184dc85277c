//! The same scenarios, run by grpc-go's own client (`interop/retry-go`,
//! grpc-go v1.85.0) and by a tonic client through `RetryLayer`, against
//! the same scripted tonic server: both must pass each scenario, and the
//! server must see the same attempts from both (how many, and each one's
//! `grpc-previous-rpc-attempts`). Needs `go` on PATH; skipped with a
//! notice without it (failing when `CI` is set).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use support::go_interop;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tonic::Code;

use crate::script::{Script, serve};
use crate::streaming::{CONFIG, ClientOp, cases, run_client, rust_client};

/// grpc-go's name of a code (`codes.Code.String()`).
fn go_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Unavailable => "Unavailable",
        Code::Internal => "Internal",
        Code::AlreadyExists => "AlreadyExists",
        other => panic!("no Go name kept for {other:?}"),
    }
}

/// A case as `retry-go` reads it: one JSON line.
fn stream_case(ops: &[ClientOp]) -> String {
    let steps: Vec<serde_json::Value> = ops
        .iter()
        .map(|op| match op {
            ClientOp::Req(message) => serde_json::json!({ "req": message }),
            ClientOp::Res(message) => serde_json::json!({ "res": message }),
            ClientOp::Err(code) => serde_json::json!({ "err": go_name(*code) }),
            ClientOp::CloseSend => serde_json::json!({ "close": true }),
            ClientOp::GetTime => serde_json::json!({ "time": true }),
            ClientOp::CheckElapsed(at_least) => {
                serde_json::json!({ "elapsed_ms": at_least.as_millis() as u64 })
            }
        })
        .collect();
    serde_json::json!({ "stream": steps }).to_string()
}

/// The Go client, started on `addr` with `config`; it answers one line
/// per case line.
struct GoClient {
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    _child: tokio::process::Child,
}

impl GoClient {
    async fn start(
        binary: &std::path::Path,
        addr: std::net::SocketAddr,
        config: &str,
        buffer: usize,
    ) -> Self {
        let mut child = tokio::process::Command::new(binary)
            .args([
                "-addr",
                &addr.to_string(),
                "-config",
                config,
                "-buffer",
                &buffer.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start retry-go");
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            _child: child,
        }
    }

    async fn run(&mut self, case: &str) -> String {
        self.stdin
            .write_all(format!("{case}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        tokio::time::timeout(support::PATIENCE, self.stdout.next_line())
            .await
            .expect("retry-go answers in time")
            .unwrap()
            .expect("retry-go is running")
    }
}

/// Waits until the server ran every step of its script.
async fn drained(script: &Script) {
    let deadline = support::deadline();
    while script.left().await != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the script did not run out"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn grpc_go_and_retry_layer_make_the_same_attempts_in_every_streaming_scenario() {
    let Some(binary) = go_interop::go_program("retry-go") else {
        return;
    };
    let script = Arc::new(Script::default());
    let addr = serve(Arc::clone(&script)).await;
    let mut go = GoClient::start(&binary, addr, CONFIG, 200).await;
    let mut rust = rust_client(addr).await;
    for (description, server_ops, client_ops) in cases() {
        let mut seen = Vec::new();
        // grpc-go first, then the tonic client, on the same script.
        script.attempts_seen.lock().unwrap().clear();
        script.set(server_ops.clone()).await;
        let answer = go.run(&stream_case(&client_ops)).await;
        assert_eq!(answer, "ok", "grpc-go: {description}");
        drained(&script).await;
        seen.push(std::mem::take(&mut *script.attempts_seen.lock().unwrap()));

        script.set(server_ops).await;
        let outcome = run_client(&mut rust, client_ops).await;
        assert_eq!(outcome, Ok(()), "RetryLayer: {description}");
        drained(&script).await;
        seen.push(std::mem::take(&mut *script.attempts_seen.lock().unwrap()));
        assert_eq!(
            seen[0], seen[1],
            "{description}: grpc-go's attempts, then ours"
        );
    }
}

#[tokio::test]
async fn grpc_go_and_retry_layer_give_the_same_unary_codes_after_the_same_calls() {
    let Some(binary) = go_interop::go_program("retry-go") else {
        return;
    };
    for (config, answer) in [
        (
            crate::unary::config(4, r#""ALREADY_EXISTS""#, ""),
            crate::unary::retry_unary as fn(u32) -> Code,
        ),
        (
            crate::unary::config(
                4,
                r#""UNAVAILABLE""#,
                r#", "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}"#,
            ),
            crate::unary::retry_throttling as fn(u32) -> Code,
        ),
    ] {
        let calls = 12;
        let (addr, server) = crate::unary::serve(answer).await;
        let mut go = GoClient::start(&binary, addr, &config, 0).await;
        let go_codes = go.run(&format!(r#"{{"unary": {calls}}}"#)).await;
        let go_calls = server.calls.swap(0, Ordering::SeqCst);

        let (addr, server) = crate::unary::serve(answer).await;
        let retry = tonic_hotpath::retry::RetryLayer::from_service_config(&config).unwrap();
        let mut client = crate::unary::client(addr, retry).await;
        let mut codes = Vec::new();
        for _ in 0..calls {
            codes.push(go_name(crate::unary::call(&mut client).await));
        }
        assert_eq!(go_codes, format!("codes: {}", codes.join(" ")));
        assert_eq!(
            go_calls,
            server.calls.load(Ordering::SeqCst),
            "server calls"
        );
    }
}
