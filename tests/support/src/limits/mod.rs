//! Shared by the `tenant_limits*` tests: an echo service whose calls can be
//! held in flight until a gate opens, a server behind a limit layer on
//! 127.0.0.1, and calls that carry an org id.

pub mod grpc_go;
#[cfg(all(feature = "otel", feature = "channelz", feature = "limits"))]
pub mod operator;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::tenant::OrgId;

use crate::stacks::{ServerLayer, spawn_echo};
use crate::{EchoClient, EchoOverride, EchoRequest, EchoResponse, ResponseStream};

/// What a call's message asks the [`GatedEcho`] to do.
pub const HOLD: &str = "hold"; // wait for the gate, then answer OK
pub const FAIL: &str = "fail"; // answer INTERNAL at once
pub const NEVER: &str = "never"; // never answer
// Anything else: answer OK at once.

/// An echo service whose calls can be held in flight: a unary call with
/// the message [`HOLD`] waits until [`Gate::open`], [`FAIL`] fails at once,
/// [`NEVER`] never answers, anything else is echoed at once. A
/// server-streaming call sends its first word, then holds its stream open
/// until the gate opens (and then ends it).
#[derive(Debug, Clone, Default)]
pub struct GatedEcho {
    gate: Gate,
}

impl GatedEcho {
    /// The gate its held calls wait on.
    pub fn gate(&self) -> Gate {
        self.gate.clone()
    }
}

/// Holds calls until opened, and counts the calls that reached the
/// handler.
#[derive(Debug, Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
    entered: Arc<AtomicUsize>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            open: Arc::new(watch::channel(false).0),
            entered: Arc::default(),
        }
    }
}

impl Gate {
    /// Lets every held call (and every later one) through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Holds calls again.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// How many calls reached the handler so far.
    pub fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    async fn pass(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

#[tonic::async_trait]
impl EchoOverride for GatedEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        self.gate.entered.fetch_add(1, Ordering::SeqCst);
        let message = request.into_inner().message;
        match message.as_str() {
            HOLD => self.gate.pass().await,
            FAIL => return Err(Status::internal("failed as asked")),
            NEVER => std::future::pending().await,
            _ => {}
        }
        Ok(Response::new(EchoResponse { message }))
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.gate.entered.fetch_add(1, Ordering::SeqCst);
        let first = request
            .into_inner()
            .message
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        let gate = self.gate.clone();
        let (send, receive) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let _ = send.send(Ok(EchoResponse { message: first })).await;
            gate.pass().await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receive))))
    }
}

/// A [`GatedEcho`] served behind `layer` on 127.0.0.1; its address and
/// gate.
pub async fn serve<L>(layer: L) -> (SocketAddr, Gate)
where
    L: ServerLayer<tonic::service::Routes>,
{
    let echo = GatedEcho::default();
    let gate = echo.gate();
    let (addr, incoming) = crate::bind().await;
    spawn_echo(layer, echo, incoming);
    (addr, gate)
}

/// A client of the echo service at `addr`.
pub async fn client(addr: SocketAddr) -> EchoClient<Channel> {
    EchoClient::new(crate::connect(addr).await)
}

/// A unary request carrying `message` and, if given, `x-scope-orgid:
/// org_id`.
pub fn request(org_id: Option<&str>, message: &str) -> Request<EchoRequest> {
    let mut request = Request::new(EchoRequest {
        message: message.to_owned(),
    });
    if let Some(org_id) = org_id {
        request
            .metadata_mut()
            .insert(OrgId::HEADER, org_id.parse().expect("a valid header value"));
    }
    request
}

/// One unary call: its code and message (the echoed text when OK).
pub async fn call(
    client: &EchoClient<Channel>,
    org_id: Option<&str>,
    message: &str,
) -> (Code, String) {
    outcome(client.clone().unary_echo(request(org_id, message)).await)
}

/// A call's code and message (the echoed text when OK).
pub fn outcome(result: Result<Response<EchoResponse>, Status>) -> (Code, String) {
    match result {
        Ok(response) => (Code::Ok, response.into_inner().message),
        Err(status) => (status.code(), status.message().to_owned()),
    }
}

/// Starts `n` concurrent unary calls of `org_id` with `message`; returns
/// their tasks and a counter of those finished.
pub fn burst(
    client: &EchoClient<Channel>,
    org_id: &str,
    message: &str,
    n: usize,
) -> (
    Vec<tokio::task::JoinHandle<(Code, String)>>,
    Arc<AtomicUsize>,
) {
    let done = Arc::new(AtomicUsize::new(0));
    let tasks = (0..n)
        .map(|_| {
            let client = client.clone();
            let org_id = org_id.to_owned();
            let message = message.to_owned();
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let outcome = call(&client, Some(&org_id), &message).await;
                done.fetch_add(1, Ordering::SeqCst);
                outcome
            })
        })
        .collect();
    (tasks, done)
}

/// Waits for every task; their outcomes in order.
pub async fn outcomes(tasks: Vec<tokio::task::JoinHandle<(Code, String)>>) -> Vec<(Code, String)> {
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await.expect("call task"));
    }
    outcomes
}

/// How many outcomes have `code`.
pub fn count(outcomes: &[(Code, String)], code: Code) -> usize {
    outcomes.iter().filter(|(c, _)| *c == code).count()
}

/// Waits (up to [`crate::PATIENCE`]) until `load()` is `want`.
pub async fn wait_for<T: PartialEq + std::fmt::Debug>(what: &str, want: T, load: impl Fn() -> T) {
    let deadline = crate::deadline();
    while Instant::now() < deadline {
        if load() == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!(
        "timed out waiting for {what}: want {want:?}, have {:?}",
        load()
    );
}

/// When a call was sent and when its answer came: its server time lies
/// between.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// When the call was sent.
    pub sent: Instant,
    /// When its answer came.
    pub returned: Instant,
}

/// One unary call of `org_id` carrying `message`, timed.
pub async fn timed(
    client: &EchoClient<Channel>,
    org_id: &str,
    message: &str,
) -> (Result<EchoResponse, Status>, Span) {
    let sent = Instant::now();
    let result = client
        .clone()
        .unary_echo(request(Some(org_id), message))
        .await
        .map(tonic::Response::into_inner);
    (
        result,
        Span {
            sent,
            returned: Instant::now(),
        },
    )
}

/// The pushback a refused call's status carries, in milliseconds.
pub fn pushback(status: &Status) -> Option<u64> {
    let value = status
        .metadata()
        .get(tonic_hotpath::limits::LimitError::RETRY_PUSHBACK_MS)?;
    Some(value.to_str().ok()?.parse().expect("a whole number"))
}

/// Asserts that a refusal at `refusal` carries the pushback the GCRA
/// gives: the bucket admits the next call `due` after the first call of
/// the burst (`first`), so a refusal at server time `t` says
/// `due - (t - first)`, rounded up to whole milliseconds.
pub fn assert_pushback(pushback_ms: u64, due: Duration, first: Span, refusal: Span) {
    let most_elapsed = refusal.returned - first.sent;
    let least_elapsed = refusal.sent.saturating_duration_since(first.returned);
    let low = due.saturating_sub(most_elapsed).as_nanos() / 1_000_000;
    let high = due
        .saturating_sub(least_elapsed)
        .as_nanos()
        .div_ceil(1_000_000);
    assert!(
        (low..=high).contains(&u128::from(pushback_ms)),
        "pushback {pushback_ms} ms, expected {low}..={high} ms"
    );
}
