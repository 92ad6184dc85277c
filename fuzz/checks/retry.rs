//! What a peer can make `RetryLayer` read: a server's answers to a call's
//! attempts (HTTP status, `grpc-status`, `grpc-retry-pushback-ms` values
//! of any bytes), and a service config (JSON) as a resolver may hand it.
//! Never a panic; never more attempts than the policy allows; every retry
//! says how many came before it; the call ends within its deadline's
//! reach (the inner service answers at once, so only backoffs wait).
//!
//! Input: a first byte; odd, the rest is a service config; even, up to six
//! answers, each an HTTP status (2 bytes), a `grpc-status` (1 byte: 0–16,
//! else none) and pushback values (bytes up to `0xff`, split on `,`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use tonic::Code;
use tonic_hotpath::retry::{RetryConfig, RetryLayer, RetryPolicy, RetryThrottling};
use tower::{Layer, Service, ServiceExt};

use super::input::Input;

const MAX_ATTEMPTS: u32 = 4;

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    if input.byte() % 2 == 1 {
        return config(input.rest());
    }
    let mut answers = Vec::new();
    while answers.len() < 6 && !input.is_empty() {
        let status = input.u16();
        let code = input.byte();
        let pushback: Vec<Vec<u8>> = input
            .until(0xff)
            .split(|&b| b == b',')
            .filter(|value| !value.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        answers.push(Answer {
            status,
            code: (code <= 16).then_some(code),
            pushback,
        });
    }
    call(answers);
}

fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match RetryConfig::from_json(&text) {
        Ok(config) => {
            for path in ["/a.B/C", "/a.B/", "", "/"] {
                if let Some(policy) = config.policy(path) {
                    assert!(policy.max_attempts() >= 2);
                }
            }
            drop(RetryLayer::new(config));
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}

#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    code: Option<u8>,
    pushback: Vec<Vec<u8>>,
}

/// Answers attempt `n` with `answers[n]` (the last one again past the
/// list), recording each attempt's `grpc-previous-rpc-attempts`.
#[derive(Clone)]
struct Scripted {
    answers: Arc<Vec<Answer>>,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl Service<Request<tonic::body::Body>> for Scripted {
    type Response = Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        let attempt = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(
                request
                    .headers()
                    .get("grpc-previous-rpc-attempts")
                    .map(|value| value.to_str().unwrap_or("?").to_owned()),
            );
            seen.len() - 1
        };
        let answer = self.answers[attempt.min(self.answers.len() - 1)].clone();
        Box::pin(async move {
            let mut response = Response::new(tonic::body::Body::empty());
            *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
            let headers = response.headers_mut();
            headers.insert("content-type", HeaderValue::from_static("application/grpc"));
            if let Some(code) = answer.code {
                headers.insert("grpc-status", HeaderValue::from(u16::from(code)));
            }
            for value in &answer.pushback {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    headers.append("grpc-retry-pushback-ms", value);
                }
            }
            Ok(response)
        })
    }
}

fn call(answers: Vec<Answer>) {
    if answers.is_empty() {
        return;
    }
    let every_code = (0..17).map(Code::from_i32);
    let policy = RetryPolicy::builder()
        .max_attempts(MAX_ATTEMPTS)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(2))
        .backoff_multiplier(2.0)
        .retryable_codes(every_code.filter(|code| *code != Code::Ok))
        .build()
        .expect("a valid policy");
    let config = RetryConfig::new()
        .default_policy(policy)
        .throttling(RetryThrottling::new(3.0, 0.5).expect("valid throttling"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let inner = Scripted {
        answers: Arc::new(answers),
        seen: Arc::clone(&seen),
    };
    let service = RetryLayer::new(config).layer(inner);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let mut request = Request::new(http_body_util::Full::new(Bytes::from_static(&[
            0, 0, 0, 0, 0,
        ])));
        *request.uri_mut() = http::Uri::from_static("/a.B/C");
        // A deadline bounds the pushbacks a peer may ask for.
        request
            .headers_mut()
            .insert("grpc-timeout", HeaderValue::from_static("20m"));
        let answer = tokio::time::timeout(Duration::from_secs(5), service.oneshot(request)).await;
        assert!(answer.is_ok(), "the deadline ends the call");
    });
    let seen = seen.lock().unwrap();
    assert!(seen.len() <= MAX_ATTEMPTS as usize, "{seen:?}");
    for (attempt, previous) in seen.iter().enumerate() {
        let want = (attempt > 0).then(|| attempt.to_string());
        assert_eq!(previous, &want, "{seen:?}");
    }
}
