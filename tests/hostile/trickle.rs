//! Scenario 2: 1 000 streams, each declaring a large message in its
//! length prefix and then trickling its bytes one per DATA frame.
//!
//! What the stats layer holds for a stream must be bounded by what it has
//! to hold (the bytes that arrived, when a handler asks for them), not by
//! the length the peer declares. The layer's handler here asks for the
//! most ([`Demanding`] with message data: every message's bytes kept until
//! it completes). Two declared lengths show the figure does not follow
//! the declaration; tonic itself, with no layer, reserves the declared
//! length for each stream (`codec/decode.rs`: `buf.reserve(len)`).

use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;
use h2::client::{ResponseFuture, SendRequest};
use tokio::task::JoinSet;
use tonic::Code;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_hotpath::stats::CombinedLayer;
use tower::layer::util::Identity;

use crate::measure::{self, Demanding, delta, kib, settled};
use support::stacks::junk::{grpc_request, h2_connect};
use support::stacks::{ServerLayer, UNARY_PATH, serve};
use support::{EchoServer, EchoService};

/// Streams open at once.
const STREAMS: usize = 1_000;
/// Connections they are spread over.
const CONNECTIONS: usize = 10;
/// Bytes each stream trickles after its prefix, one per DATA frame.
const TRICKLED: usize = 128;
/// The declared message lengths: 1 MiB, and tonic's default limit.
const DECLARED: [u32; 2] = [1 << 20, 4 << 20];

/// The bound on the layer's extra bytes per stream: the bytes that
/// arrived, kept until the message completes (copied into one growing
/// buffer: at most twice their size), and its record of the RPC. 4 bytes
/// per byte received, plus 1 KiB, whatever the declared length. (Before
/// short chunks were copied together, each 1-byte chunk cost a 32-byte
/// slice handle and kept h2's read buffer alive: over 4 KiB a stream
/// here.)
const PER_STREAM_BOUND: usize = 4 * TRICKLED + 1024;

/// What one run showed: bytes live before the streams opened, with every
/// stream open and trickled, and after the client reset them all (the
/// connections still open), and how long the streams took to open.
#[derive(Debug)]
struct Trickle {
    baseline: usize,
    open: usize,
    after: usize,
    took: std::time::Duration,
}

impl Trickle {
    /// Bytes per open stream: what resetting the streams freed. Measured
    /// against the bytes live after the reset rather than before the
    /// streams opened, so that what h2 keeps for a connection once it grew
    /// (its tables of streams and queued frames, sized by how many frames
    /// were queued at once: timing) counts on both sides.
    fn per_stream(&self) -> f64 {
        delta(self.open, self.after) as f64 / STREAMS as f64
    }
}

/// Opens a unary call on `client` that declares a `declared`-byte
/// message and sends [`TRICKLED`] bytes of it, one DATA frame each,
/// a millisecond apart so that the streams interleave. The stream
/// stays open while the returned halves are held; dropping them resets it
/// (`RST_STREAM` `CANCEL`).
async fn trickle(client: SendRequest<Bytes>, declared: u32) -> (ResponseFuture, SendStream<Bytes>) {
    let mut client = client.ready().await.expect("stream allowed");
    let request = grpc_request(UNARY_PATH, "application/grpc");
    let (response, mut send) = client.send_request(request, false).expect("headers");
    let mut prefix = vec![0];
    prefix.extend_from_slice(&declared.to_be_bytes());
    send.send_data(prefix.into(), false).expect("prefix");
    for _ in 0..TRICKLED {
        send.send_data(Bytes::from_static(b"a"), false)
            .expect("one byte");
        // Paced: h2 refuses a peer that floods it with tiny DATA frames
        // faster than the server reads them (seen on a loaded machine).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (response, send)
}

/// Serves the echo service behind `layer`, opens [`STREAMS`] trickling
/// streams over [`CONNECTIONS`] connections, measures, and resets them.
async fn run<L: ServerLayer<Routes>>(layer: L, declared: u32) -> Trickle {
    let (addr, incoming) = support::bind().await;
    let server = serve(
        Server::builder(),
        layer,
        Routes::new(EchoServer::new(EchoService)),
        incoming,
    );
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        clients.push(h2_connect(addr).await);
    }
    let baseline = settled().await;
    let started = std::time::Instant::now();
    let mut opening = JoinSet::new();
    for client in clients.iter().cycle().take(STREAMS) {
        opening.spawn(trickle(client.clone(), declared));
    }
    let streams = opening.join_all().await;
    let took = started.elapsed();
    let open = settled().await;
    drop(streams);
    let after = settled().await;
    server.abort();
    Trickle {
        baseline,
        open,
        after,
        took,
    }
}

#[test]
fn trickled_streams_cost_the_layer_what_arrived_not_what_was_declared() {
    let _serial = measure::serial();
    measure::runtime().block_on(async {
        let mut extras = Vec::new();
        for declared in DECLARED {
            let tonic = run(Identity::new(), declared).await;
            let handler = std::sync::Arc::new(Demanding::<true>::default());
            let layered = run(
                CombinedLayer::server().with(std::sync::Arc::clone(&handler)),
                declared,
            )
            .await;
            let extra = layered.per_stream() - tonic.per_stream();
            eprintln!(
                "trickle: declared {:>4} KiB, {TRICKLED} B sent: no layer {:>7.1} KiB a stream, \
                 layer {:>7.1} KiB a stream, layer's extra {:>5.2} KiB a stream (bound {:.2} KiB); \
                 after reset: no layer {:+.0} KiB, layer {:+.0} KiB; took {:.1?} and {:.1?}",
                declared / 1024,
                tonic.per_stream() / 1024.0,
                layered.per_stream() / 1024.0,
                extra / 1024.0,
                kib(PER_STREAM_BOUND),
                kib(delta(tonic.after, tonic.baseline)),
                kib(delta(layered.after, layered.baseline)),
                tonic.took,
                layered.took,
            );
            // Every stream was open while measured, and ended once when
            // the client reset it.
            assert_eq!(handler.ended(Code::Cancelled), STREAMS);
            assert_eq!(handler.ended_total(), STREAMS);
            assert!(
                extra < PER_STREAM_BOUND as f64,
                "declared {declared}: the layer holds {extra:.0} bytes a stream"
            );
            // Tonic reserves the declared length for each stream: the
            // streams were measured with their prefix read.
            assert!(tonic.per_stream() > f64::from(declared));
            extras.push(extra);
        }
        // Four times the declared length, the same layer figure: the
        // difference is far below a byte per declared kilobyte.
        let spread = (extras[1] - extras[0]).abs();
        assert!(
            spread < 1024.0,
            "the layer's bytes a stream follow the declared length: {extras:?}"
        );
    });
}
