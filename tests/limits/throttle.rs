//! `AdaptiveThrottleLayer` under a generated client on a tonic `Channel`
//! (`EchoClient::new(ServiceBuilder::new().layer(throttle).service(channel))`),
//! against real servers on 127.0.0.1: a tonic echo server that refuses on
//! demand, and raw HTTP/2 peers answering with a status in each place it
//! can be (trailers-only headers, trailers, a bare HTTP status). Bounds
//! are on calls counted at the server, never on time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::h2_reply::{self, Reply};
use support::stacks::{echo_frame, spawn_echo};
use support::{
    Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoService, ResponseStream, bind,
    connect, wait_until,
};
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::limits::{AdaptiveThrottle, AdaptiveThrottleLayer};
use tower::ServiceBuilder;
use tower::layer::util::Identity;

type Client = EchoClient<AdaptiveThrottle<Channel>>;

/// The generated client over `channel`, through `throttle`.
fn throttled(channel: Channel, throttle: &AdaptiveThrottleLayer) -> Client {
    EchoClient::new(
        ServiceBuilder::new()
            .layer(throttle.clone())
            .service(channel),
    )
}

/// What the [`Switch`] makes the server answer.
const ACCEPT: u8 = 0;
const UNAVAILABLE: u8 = 1;
const EXHAUSTED: u8 = 2;
/// Accept the first call and every tenth after it, refuse the others.
const ONE_IN_TEN: u8 = 3;

/// An echo server that refuses its calls while the test says so, and
/// counts the calls that reached it and those it accepted.
#[derive(Debug, Default)]
struct Switch {
    mode: AtomicU8,
    entered: AtomicUsize,
    accepted: AtomicUsize,
}

impl Switch {
    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The refusal for the call that just entered, if it is refused.
    fn refusal(&self) -> Option<Status> {
        let n = self.entered.fetch_add(1, Ordering::SeqCst);
        let refusal = match self.mode.load(Ordering::SeqCst) {
            UNAVAILABLE => Some(Status::unavailable("overloaded")),
            EXHAUSTED => Some(Status::resource_exhausted("over quota")),
            ONE_IN_TEN if !n.is_multiple_of(10) => Some(Status::unavailable("overloaded")),
            _ => None,
        };
        if refusal.is_none() {
            self.accepted.fetch_add(1, Ordering::SeqCst);
        }
        refusal
    }
}

#[tonic::async_trait]
impl EchoOverride for Switch {
    /// Refused trailers-only (tonic answers a handler's error so); the
    /// message `invalid` is answered `INVALID_ARGUMENT`.
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        if request.get_ref().message == "invalid" {
            return Err(Status::invalid_argument("invalid"));
        }
        EchoService.unary_echo(request).await
    }

    /// Refused in the trailers, after a first message.
    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let message = request.into_inner().message;
        let mut items = vec![Ok(EchoResponse { message })];
        items.extend(self.refusal().map(Err));
        Ok(Response::new(Box::pin(tokio_stream::iter(items))))
    }
}

/// A tonic echo server behind `switch`; its address.
async fn serve(switch: Arc<Switch>) -> std::net::SocketAddr {
    let (addr, incoming) = bind().await;
    spawn_echo(Identity::new(), switch, incoming);
    addr
}

/// One unary call; whether the throttle rejected it locally.
async fn call(client: &mut Client, message: &str) -> Result<(), Status> {
    let request = EchoRequest {
        message: message.to_owned(),
    };
    client.unary_echo(request).await.map(drop)
}

fn rejected_locally(status: &Status) -> bool {
    status.code() == Code::Unavailable
        && status.message() == AdaptiveThrottleLayer::REJECTED_MESSAGE
}

/// A window long enough to hold a whole test, in 10 ms bins.
fn long_window() -> AdaptiveThrottleLayer {
    AdaptiveThrottleLayer::new()
        .with_lookback(Duration::from_secs(60), 6_000)
        .unwrap()
}

/// Sends `n` calls one at a time; the statuses, counted.
async fn send(client: &mut Client, n: usize) -> (usize, usize) {
    let (mut local, mut refused) = (0, 0);
    for _ in 0..n {
        match call(client, "hi").await {
            Err(status) if rejected_locally(&status) => local += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                refused += 1;
            }
            Ok(()) => panic!("the server refuses everything"),
        }
    }
    (local, refused)
}

#[tokio::test]
async fn a_backend_refusing_everything_gets_fewer_and_fewer_calls() {
    let switch = Arc::new(Switch::default());
    switch.set(UNAVAILABLE);
    let throttle = long_window();
    let mut client = throttled(connect(serve(switch.clone()).await).await, &throttle);

    let (local_a, refused_a) = send(&mut client, 200).await;
    let first = switch.entered();
    assert_eq!(refused_a, first);
    assert_eq!(local_a + refused_a, 200);
    // The window holds 200 refusals (or more) from here on: the throttle
    // rejects with 200 / 208 at least, so of 400 more calls about
    // 8 · ln(600 / 200) ≈ 9 reach the server (padding 8, no accepts).
    let (local_b, refused_b) = send(&mut client, 400).await;
    let second = switch.entered() - first;
    assert_eq!(refused_b, second);
    assert_eq!(local_b + refused_b, 400);
    eprintln!("refused everything: {first} of 200 calls sent, then {second} of 400");
    assert!(first >= 1, "the first call is always sent");
    assert!(second <= 40, "{second} of 400 calls reached the server");
    assert!(
        second * 200 < first * 400,
        "the share sent must fall: {first} of 200, then {second} of 400"
    );
    // Every call is a request, none an accept.
    wait_until("600 requests in the window", || {
        throttle.counts().requests == 600
    })
    .await;
    assert_eq!(throttle.counts().accepts, 0);
}

#[tokio::test]
async fn a_backend_accepting_some_gets_what_the_formula_allows() {
    let switch = Arc::new(Switch::default());
    switch.set(ONE_IN_TEN);
    let throttle = long_window();
    let mut client = throttled(connect(serve(switch.clone()).await).await, &throttle);
    let mut local = 0;
    for _ in 0..1_000 {
        match call(&mut client, "hi").await {
            Err(status) if rejected_locally(&status) => local += 1,
            _ => {}
        }
    }
    let (sent, accepted) = (switch.entered(), switch.accepted());
    eprintln!("accepting 1 in 10: {sent} of 1 000 calls sent, {accepted} accepted");
    assert_eq!(local + sent, 1_000);
    assert!(
        accepted >= 1 && accepted * 10 >= sent,
        "{accepted} of {sent}"
    );
    // Sent calls grow as (8 + K·accepts) / (requests + 8) per request:
    // about 65 of 1 000 here, a tenth of them accepted. The bound leaves
    // 4× room for the bins' lag and chance.
    assert!(sent <= 260, "{sent} of 1 000 calls reached the server");
    wait_until("1 000 requests in the window", || {
        throttle.counts().requests == 1_000
    })
    .await;
    assert_eq!(throttle.counts().accepts, accepted as u64);
}

#[tokio::test]
async fn rejections_stop_once_the_backend_accepts_again() {
    let switch = Arc::new(Switch::default());
    switch.set(EXHAUSTED);
    let lookback = Duration::from_secs(1);
    let throttle = AdaptiveThrottleLayer::new()
        .with_lookback(lookback, 100)
        .unwrap();
    let mut client = throttled(connect(serve(switch.clone()).await).await, &throttle);
    let deadline = support::deadline();
    while throttle.counts().throttle_probability < 0.5 {
        assert!(Instant::now() < deadline, "the throttle never engaged");
        let status = call(&mut client, "hi").await.unwrap_err();
        assert!(
            status.code() == Code::ResourceExhausted || rejected_locally(&status),
            "{status:?}"
        );
    }

    switch.set(ACCEPT);
    let recovered_at = Instant::now();
    // Once accepts are half the window's requests (K = 2), or the refusals
    // have left it (a lookback), the probability is exactly 0: no call is
    // rejected any more. 200 calls in a row must all pass.
    let mut in_a_row = 0;
    while in_a_row < 200 {
        assert!(Instant::now() < deadline, "rejections did not stop");
        match call(&mut client, "hi").await {
            Ok(()) => in_a_row += 1,
            Err(status) if rejected_locally(&status) => in_a_row = 0,
            Err(status) => panic!("{status:?}"),
        }
    }
    eprintln!(
        "local rejections stopped within {:?} (lookback {lookback:?})",
        recovered_at.elapsed()
    );
    assert_eq!(throttle.counts().throttle_probability, 0.0);
}

/// Sends 5 calls through a fresh throttle to `channel`, waits until all
/// are in the window, and returns how many it counted as accepts.
async fn accepts_of_5(channel: Channel, streaming: bool) -> u64 {
    let throttle = AdaptiveThrottleLayer::new()
        .with_lookback(Duration::from_secs(60), 600)
        .unwrap();
    let mut client = throttled(channel, &throttle);
    for _ in 0..5 {
        let request = EchoRequest {
            message: "hi".to_owned(),
        };
        if streaming {
            if let Ok(response) = client.server_streaming_echo(request).await {
                let mut stream = response.into_inner();
                while let Ok(Some(_)) = stream.message().await {}
            }
        } else {
            let _ = client.unary_echo(request).await;
        }
    }
    wait_until("5 requests in the window", || {
        throttle.counts().requests == 5
    })
    .await;
    throttle.counts().accepts
}

fn grpc(status: u16) -> Reply {
    Reply::bare(status).header("content-type", "application/grpc")
}

#[tokio::test]
async fn refusals_count_wherever_the_status_is() {
    // A tonic server's own answers: trailers-only, and in the trailers
    // after a message.
    let switch = Arc::new(Switch::default());
    let addr = serve(switch.clone()).await;
    for (mode, streaming) in [
        (UNAVAILABLE, false),
        (EXHAUSTED, false),
        (UNAVAILABLE, true),
        (EXHAUSTED, true),
    ] {
        switch.set(mode);
        let accepts = accepts_of_5(connect(addr).await, streaming).await;
        assert_eq!(accepts, 0, "mode {mode}, streaming {streaming}");
    }
    // Raw peers: each place a status can be.
    let mut trailers = grpc(200);
    trailers.body = vec![echo_frame("hi")];
    trailers.trailers = Some(vec![("grpc-status", "14")]);
    for (what, reply) in [
        ("trailers-only 14", grpc(200).header("grpc-status", "14")),
        ("trailers-only 8", grpc(200).header("grpc-status", "8")),
        ("trailers 14", trailers),
        ("bare 503", Reply::bare(503)),
        ("bare 429", Reply::bare(429)),
    ] {
        let channel = connect(h2_reply::serve(reply).await).await;
        assert_eq!(accepts_of_5(channel, false).await, 0, "{what}");
    }
    // No server at all: the transport fails, a refusal of UNAVAILABLE.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let channel = support::endpoint(addr).connect_lazy();
    assert_eq!(accepts_of_5(channel, false).await, 0, "no server");
}

#[tokio::test]
async fn other_answers_count_as_accepts() {
    let switch = Arc::new(Switch::default());
    let addr = serve(switch.clone()).await;
    assert_eq!(accepts_of_5(connect(addr).await, false).await, 5, "OK");
    assert_eq!(
        accepts_of_5(connect(addr).await, true).await,
        5,
        "OK streamed"
    );
    let throttle = long_window();
    let mut client = throttled(connect(addr).await, &throttle);
    for _ in 0..5 {
        let status = call(&mut client, "invalid").await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
    }
    wait_until("5 requests in the window", || {
        throttle.counts().requests == 5
    })
    .await;
    assert_eq!(throttle.counts().accepts, 5, "INVALID_ARGUMENT");
    let mut ok_trailers = Reply::grpc_ok(vec![echo_frame("hi")]);
    ok_trailers.headers.clear();
    ok_trailers = ok_trailers.header("content-type", "application/grpc");
    let mut no_status = grpc(200);
    no_status.body = vec![echo_frame("hi")];
    for (what, reply) in [
        ("OK in the trailers", ok_trailers),
        ("trailers-only 3", grpc(200).header("grpc-status", "3")),
        ("no status at all (UNKNOWN)", no_status),
        ("bare 404 (UNIMPLEMENTED)", Reply::bare(404)),
    ] {
        let channel = connect(h2_reply::serve(reply).await).await;
        assert_eq!(accepts_of_5(channel, false).await, 5, "{what}");
    }
}

#[tokio::test]
async fn refusal_codes_are_the_layer_s_choice() {
    let switch = Arc::new(Switch::default());
    switch.set(EXHAUSTED);
    let throttle = long_window().with_refusal_codes([Code::Unavailable]);
    let mut client = throttled(connect(serve(switch.clone()).await).await, &throttle);
    for _ in 0..50 {
        let status = call(&mut client, "hi").await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    }
    // Not a refusal for this layer: every call reached the server.
    assert_eq!(switch.entered(), 50);
    wait_until("50 requests in the window", || {
        throttle.counts().requests == 50
    })
    .await;
    assert_eq!(throttle.counts().accepts, 50);
}
