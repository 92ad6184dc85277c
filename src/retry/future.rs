//! [`ResponseFuture`]: one call's attempts, from the first to the one
//! whose answer the caller gets.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Extensions, HeaderMap, HeaderName, Method, Request, Response, Uri, Version};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tonic::{Code, Status};
use tower::{BoxError, Service};

use super::body::{AttemptBody, CallBody};
use super::decision::{Failure, Next, Retries, unprocessed};
use super::layer::Settings;
use super::policy::RetryPolicy;
use super::response::ResponseBody;
use super::throttle::Throttle;
use crate::stats::CallAttempt;
use crate::stats::layer::status::transport_error_code;
use crate::wire::content_type::is_grpc;
use crate::wire::status::{self as wire_status, GRPC_TIMEOUT, Pushback};

/// `grpc-previous-rpc-attempts`: the retries before this attempt.
const PREVIOUS_ATTEMPTS: HeaderName = HeaderName::from_static("grpc-previous-rpc-attempts");

pin_project! {
    /// The response future of [`Retry`](super::Retry): the call's current
    /// attempt, or the wait before the next one.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<tonic::body::Body>>,
    {
        #[pin]
        attempt: Attempt<S::Future>,
        call: Call<S, B>,
    }
}

pin_project! {
    #[project = AttemptProj]
    enum Attempt<F> {
        /// An attempt in flight.
        Calling { #[pin] future: F },
        /// Waiting for the backoff (`Call::sleep`), then for the service.
        Waiting,
        /// The call was answered.
        Done,
    }
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<tonic::body::Body>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.attempt {
            Attempt::Calling { .. } => "calling",
            Attempt::Waiting => "waiting",
            Attempt::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.call.attempts)
            .field("retries", &self.call.retries.made)
            .finish_non_exhaustive()
    }
}

/// What a call keeps to make its next attempt.
struct Call<S, B> {
    service: S,
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    body: Arc<CallBody<B>>,
    policy: Option<RetryPolicy>,
    max_attempts: u32,
    throttle: Option<Arc<Throttle>>,
    retries: Retries,
    /// Attempts made (transparent ones included): the next one's number.
    attempts: u32,
    deadline: Option<Instant>,
    /// The backoff before the next attempt, when there is one.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The last attempt, as the stats layer below sees it.
    attempt: Option<CallAttempt>,
    /// Whether the next attempt is a transparent retry.
    transparent: bool,
}

impl<S, B> Call<S, B>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    /// The next attempt's request: the call's headers, with what remains
    /// of its deadline and the retries before it, and a body that replays
    /// the messages sent so far. `Err` when the deadline has passed.
    fn next_request(&mut self) -> Result<Request<tonic::body::Body>, Status> {
        let attempt = self.attempts;
        self.attempts += 1;
        self.body.start(attempt);
        let mut headers = self.headers.clone();
        if attempt > 0
            && let Some(deadline) = self.deadline
        {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(deadline_exceeded());
            }
            headers.insert(GRPC_TIMEOUT, wire_status::encode_timeout(left));
        }
        if self.retries.made > 0 {
            headers.insert(PREVIOUS_ATTEMPTS, self.retries.made.into());
        }
        let mut request = Request::new(tonic::body::Body::new(AttemptBody::new(
            Arc::clone(&self.body),
            attempt,
        )));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = headers;
        let mut extensions = self.extensions.clone();
        let this_attempt = match &self.attempt {
            None => CallAttempt::first(),
            Some(last) => last.next(self.transparent),
        };
        extensions.insert(this_attempt.clone());
        self.attempt = Some(this_attempt);
        *request.extensions_mut() = extensions;
        Ok(request)
    }

    /// What follows an attempt's answer: the caller's response (`Ok`), or
    /// another attempt (`Err`, with the delay before it).
    fn judge<RB, E>(
        &mut self,
        answer: Result<Response<RB>, E>,
    ) -> Result<Result<Response<ResponseBody<RB>>, BoxError>, Duration>
    where
        E: Into<BoxError>,
    {
        let attempt = self.attempts.saturating_sub(1);
        let (failure, answer) = match answer {
            Err(error) => {
                let error: BoxError = error.into();
                let failure = Failure {
                    code: transport_error_code(&*error),
                    pushback: Pushback::None,
                    unprocessed: unprocessed(&*error),
                };
                // The channel's own deadline (tonic's `TimeoutExpired`,
                // which tonic would hand the caller as `CANCELLED`): the
                // call's deadline, as grpc-go reports it.
                let error = if failure.code == Code::DeadlineExceeded {
                    Status::deadline_exceeded(error.to_string()).into()
                } else {
                    error
                };
                (failure, Err(error))
            }
            Ok(response) => match trailers_only_code(&response) {
                // Response headers: the call commits to this attempt.
                None => {
                    self.body.commit(attempt);
                    // The call is answered: its budget handle goes to the body
                    // (no second count on the shared `Arc`).
                    let throttle = self.throttle.take();
                    return Ok(Ok(response.map(|body| ResponseBody::new(body, throttle))));
                }
                Some(Code::Ok) => {
                    self.body.commit(attempt);
                    if let Some(throttle) = &self.throttle {
                        throttle.succeeded();
                    }
                    return Ok(Ok(response.map(|body| ResponseBody::new(body, None))));
                }
                Some(code) => {
                    let failure = Failure {
                        code,
                        pushback: wire_status::pushback(response.headers()),
                        unprocessed: false,
                    };
                    (
                        failure,
                        Ok(response.map(|body| ResponseBody::new(body, None))),
                    )
                }
            },
        };
        let next = if self.body.is_final() {
            Next::Answer
        } else {
            self.retries.next(
                failure,
                self.policy.as_ref(),
                self.max_attempts,
                self.throttle.as_deref(),
            )
        };
        match next {
            Next::Answer => {
                self.body.commit(attempt);
                // The call's scope ends once the attempts' handlers let go.
                self.attempt = None;
                Ok(answer)
            }
            Next::Transparent => {
                self.transparent = true;
                Err(Duration::ZERO)
            }
            Next::RetryAfter(delay) => {
                self.transparent = false;
                Err(delay)
            }
        }
    }
}

/// The code of a response that ends the attempt without response headers:
/// a trailers-only answer (`grpc-status` in the headers), or what is not
/// a gRPC answer at all (a proxy's bare HTTP status, another content
/// type), which grpc-go reads as trailers-only too, with the code of its
/// HTTP status. `None` for response headers.
fn trailers_only_code<RB>(response: &Response<RB>) -> Option<Code> {
    if let Some(code) = wire_status::status_code(response.headers()) {
        return Some(code);
    }
    if response.status() != http::StatusCode::OK {
        return Some(wire_status::http_status_code(response.status()));
    }
    (!is_grpc(response.headers(), false)).then_some(Code::Unknown)
}

fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded before the next retry attempt")
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<tonic::body::Body>>,
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    /// Starts a call on `service`, which is ready: its first attempt.
    pub(crate) fn new(service: S, request: Request<B>, settings: &Settings) -> Self {
        let (parts, body) = request.into_parts();
        let policy = settings.config.policy(parts.uri.path()).copied();
        let deadline = wire_status::timeout(&parts.headers)
            .and_then(|timeout| Instant::now().checked_add(timeout));
        let body = Arc::new(CallBody::new(
            body,
            settings.per_call_buffer,
            settings.channel.clone(),
        ));
        let mut call = Call {
            service,
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
            extensions: parts.extensions,
            body,
            policy,
            max_attempts: settings.config.call_attempts_cap(),
            throttle: settings.throttle.clone(),
            retries: Retries::default(),
            attempts: 0,
            deadline,
            sleep: None,
            attempt: None,
            transparent: false,
        };
        let attempt = match call.next_request() {
            Ok(request) => Attempt::Calling {
                future: call.service.call(request),
            },
            // The first attempt is never refused for its deadline.
            Err(_) => Attempt::Done,
        };
        Self { attempt, call }
    }
}

impl<S, B, RB> Future for ResponseFuture<S, B>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response<ResponseBody<RB>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let call = this.call;
        loop {
            match this.attempt.as_mut().project() {
                AttemptProj::Calling { future } => {
                    let answer = ready!(future.poll(cx));
                    match call.judge(answer) {
                        Ok(answer) => {
                            this.attempt.set(Attempt::Done);
                            return Poll::Ready(answer);
                        }
                        Err(delay) => {
                            call.sleep = (!delay.is_zero()).then(|| {
                                let wake = Instant::now() + delay;
                                let wake =
                                    call.deadline.map_or(wake, |deadline| wake.min(deadline));
                                Box::pin(tokio::time::sleep_until(wake))
                            });
                            this.attempt.set(Attempt::Waiting);
                        }
                    }
                }
                AttemptProj::Waiting => {
                    if let Some(sleep) = &mut call.sleep {
                        ready!(sleep.as_mut().poll(cx));
                        call.sleep = None;
                    }
                    if let Err(error) = ready!(call.service.poll_ready(cx)) {
                        this.attempt.set(Attempt::Done);
                        return Poll::Ready(Err(error.into()));
                    }
                    match call.next_request() {
                        Ok(request) => {
                            let future = call.service.call(request);
                            this.attempt.set(Attempt::Calling { future });
                        }
                        Err(status) => {
                            this.attempt.set(Attempt::Done);
                            return Poll::Ready(Err(status.into()));
                        }
                    }
                }
                AttemptProj::Done => {
                    return Poll::Ready(Err(Status::internal(
                        "tonic_hotpath::retry future polled after completion",
                    )
                    .into()));
                }
            }
        }
    }
}
