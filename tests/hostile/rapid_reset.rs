//! Scenario 5: a rapid-reset flood (CVE-2023-44487's shape, issue #35).
//! [`CONNECTIONS`] raw h2 clients each open a gRPC call and cancel it at
//! once (`RST_STREAM` `CANCEL`), as fast as they can write, up to
//! [`STREAMS`] each, until the server's h2 gives up on the connection
//! (GOAWAY `ENHANCE_YOUR_CALM`, its bound on streams reset before the
//! server accepted them).
//!
//! hyper spawns a task per accepted stream and calls the service (and so
//! the stats layer) at that task's first poll, which can come after its
//! connection failed and was dropped. What must hold: every call still
//! reaches the handlers with its own connection's state (a handler with
//! connection state, as channelz has), every `Begin` gets its `End`, and
//! the server answers a normal call afterwards. The figures are printed
//! (`--nocapture`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_hotpath::stats::{CombinedLayer, ConnEvent, ConnInfo, RpcEvent, RpcInfo, StatsHandler};

use crate::measure;
use support::stacks::junk::{grpc_request, h2_connect};
use support::stacks::{UNARY_PATH, serve};
use support::{EchoClient, EchoRequest, EchoServer, EchoService};

/// Flooding connections, at once.
const CONNECTIONS: usize = 40;
/// The most calls each one opens and cancels.
const STREAMS: usize = 5_000;
/// Calls a client queues before it lets the other tasks run: under h2's
/// default bound of 20 streams reset before the server accepted them
/// (`DEFAULT_REMOTE_RESET_STREAM_MAX`, checked in `Recv::recv_reset`), so
/// that the server accepts (and dispatches) many calls before a read that
/// brings more resets than that trips the bound. A client that never
/// yields has every call reset before the server sees it; one that
/// yields after each call is rarely refused.
const BURST: usize = 16;
/// Floods of [`CONNECTIONS`], one after another: whether a call accepted
/// just before its connection fails is dispatched after the connection
/// was dropped depends on how the runtime orders its tasks, so each wave
/// is another chance for it.
const WAVES: usize = 4;
/// How long one flooding client may take: it finishes in well under a
/// second alone; the bound only keeps a stuck one from hanging the test.
const FLOOD_PATIENCE: Duration = Duration::from_secs(120);

/// A connection's state (not zero-sized, so the layer looks each call's
/// connection up): its peer's address, and whether it ended.
#[derive(Debug, Default)]
struct Peer {
    addr: Option<SocketAddr>,
    ended: AtomicBool,
}

/// Counts what the layer delivered: calls tagged with their own
/// connection (and of those, the ones tagged after its `ConnEnd`), with
/// another one, without one; `Begin`s, `End`s; connections begun and
/// ended.
#[derive(Debug, Default)]
struct Tally {
    own_conn: AtomicUsize,
    after_conn_end: AtomicUsize,
    other_conn: AtomicUsize,
    no_conn: AtomicUsize,
    begins: AtomicUsize,
    ends: AtomicUsize,
    conns_begun: AtomicUsize,
    conns_ended: AtomicUsize,
}

/// A reading of every [`Tally`] counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    own_conn: usize,
    after_conn_end: usize,
    other_conn: usize,
    no_conn: usize,
    begins: usize,
    ends: usize,
    conns_begun: usize,
    conns_ended: usize,
}

impl Tally {
    fn counts(&self) -> Counts {
        let get = |counter: &AtomicUsize| counter.load(Ordering::SeqCst);
        Counts {
            own_conn: get(&self.own_conn),
            after_conn_end: get(&self.after_conn_end),
            other_conn: get(&self.other_conn),
            no_conn: get(&self.no_conn),
            begins: get(&self.begins),
            ends: get(&self.ends),
            conns_begun: get(&self.conns_begun),
            conns_ended: get(&self.conns_ended),
        }
    }

    /// Waits (up to [`support::PATIENCE`]) until `connections` ended and
    /// every call that began was tagged and ended, all in one reading,
    /// and returns it.
    async fn settled(&self, connections: usize) -> Counts {
        let deadline = support::deadline();
        loop {
            let counts = self.counts();
            let tagged = counts.own_conn + counts.other_conn + counts.no_conn;
            if counts.conns_ended == connections
                && tagged == counts.begins
                && counts.ends == counts.begins
            {
                return counts;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for every connection's and call's end: {counts:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl StatsHandler for Tally {
    type RpcState = ();
    type ConnState = Peer;
    const PAYLOAD_TIMES: bool = false;

    fn tag_conn(&self, info: &ConnInfo) -> Peer {
        Peer {
            addr: info.peer_addr,
            ended: AtomicBool::new(false),
        }
    }

    fn handle_conn(&self, conn: &Peer, event: &ConnEvent) {
        let counter = match event {
            ConnEvent::Begin { .. } => &self.conns_begun,
            ConnEvent::End { .. } => {
                conn.ended.store(true, Ordering::SeqCst);
                &self.conns_ended
            }
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Peer>) {
        let counter = match conn {
            Some(conn) if conn.addr == info.peer_addr => {
                if conn.ended.load(Ordering::SeqCst) {
                    self.after_conn_end.fetch_add(1, Ordering::SeqCst);
                }
                &self.own_conn
            }
            Some(_) => &self.other_conn,
            None => &self.no_conn,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        let counter = match event {
            RpcEvent::Begin { .. } => &self.begins,
            RpcEvent::End(_) => &self.ends,
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// How one flooding connection ended: the calls it opened, and the error
/// that stopped it, if the server gave up on it first.
#[derive(Debug)]
struct Flooded {
    opened: usize,
    error: Option<h2::Error>,
}

impl Flooded {
    /// Whether the server gave up on the connection for its resets.
    fn calmed(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|error| error.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM))
    }
}

/// Opens up to [`STREAMS`] unary calls on a new connection to `addr`,
/// each cancelled as soon as it is queued, [`BURST`] at a time, until the
/// connection fails.
async fn flood(addr: SocketAddr) -> Flooded {
    let mut client = h2_connect(addr).await;
    for opened in 0..STREAMS {
        let failed = |error| Flooded {
            opened,
            error: Some(error),
        };
        client = match client.ready().await {
            Ok(ready) => ready,
            Err(error) => return failed(error),
        };
        let request = grpc_request(UNARY_PATH, "application/grpc");
        match client.send_request(request, false) {
            Ok((response, mut stream)) => {
                // h2 sends the HEADERS queued to open the stream, then
                // the reset.
                stream.send_reset(h2::Reason::CANCEL);
                drop(response);
            }
            Err(error) => return failed(error),
        }
        if opened % BURST == BURST - 1 {
            tokio::task::yield_now().await;
        }
    }
    Flooded {
        opened: STREAMS,
        error: None,
    }
}

#[test]
fn rapid_reset_calls_keep_their_connection() {
    let _serial = measure::serial();
    measure::runtime().block_on(async {
        let tally = Arc::new(Tally::default());
        let layer = CombinedLayer::server().with(Arc::clone(&tally));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let incoming = layer.incoming_tcp(listener);
        let server = serve(
            Server::builder(),
            layer,
            Routes::new(EchoServer::new(EchoService)),
            incoming,
        );

        let mut flooded = Vec::with_capacity(WAVES * CONNECTIONS);
        for _ in 0..WAVES {
            let mut clients = JoinSet::new();
            for _ in 0..CONNECTIONS {
                clients.spawn(async move {
                    tokio::time::timeout(FLOOD_PATIENCE, flood(addr))
                        .await
                        .expect("a flooding client finished in time")
                });
            }
            flooded.extend(clients.join_all().await);
        }
        let opened: usize = flooded.iter().map(|flooded| flooded.opened).sum();
        let calmed = flooded.iter().filter(|flooded| flooded.calmed()).count();
        let failed = flooded
            .iter()
            .filter(|flooded| flooded.error.is_some())
            .count();

        // Every connection closes (the server gave up on it, or the
        // client dropped it having opened all its calls), and every call
        // the server began was tagged and ends.
        let counts = tally.settled(WAVES * CONNECTIONS).await;
        eprintln!(
            "rapid_reset: {WAVES} x {CONNECTIONS} connections opened {opened} calls \
             ({calmed} connections answered GOAWAY ENHANCE_YOUR_CALM, {} failed otherwise); \
             the server began {} and ended {}; tagged with their connection {} \
             ({} of them after its ConnEnd), with another {}, without one {}",
            failed - calmed,
            counts.begins,
            counts.ends,
            counts.own_conn,
            counts.after_conn_end,
            counts.other_conn,
            counts.no_conn,
        );
        assert_eq!(counts.no_conn, 0, "calls tagged without their connection");
        assert_eq!(counts.other_conn, 0, "calls tagged with another connection");
        assert_eq!(counts.conns_begun, WAVES * CONNECTIONS, "connections begun");

        // The server still answers, on a new connection, linked to it.
        let mut client = EchoClient::new(support::connect(addr).await);
        let reply = client
            .unary_echo(EchoRequest {
                message: "still here".to_owned(),
            })
            .await
            .expect("a normal call after the flood");
        assert_eq!(reply.into_inner().message, "still here");
        let after = tally.counts();
        assert!(
            after.own_conn > counts.own_conn,
            "the call after the flood: {after:?}"
        );
        assert_eq!(after.no_conn, 0, "calls tagged without their connection");
        assert_eq!(after.other_conn, 0, "calls tagged with another connection");
        server.abort();
    });
}
