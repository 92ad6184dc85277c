//! Scenario 1: 1 000 concurrent streams, each sending one gzip message
//! that inflates past the server's decode limit.
//!
//! The stats layer, with a handler that asks for uncompressed sizes,
//! decompresses every compressed message a second time beside tonic's own
//! decoder, with the decoders each thread keeps (`stats::compression`).
//! Its extra memory must be per thread, not per stream, and every stream
//! must end with the status tonic gives without the layer.
//!
//! Three servers, one after another, each flooded the same way: tonic with
//! no layer, the layer with a handler that asks for nothing (`Noop`), and
//! the layer with [`Demanding`] (uncompressed sizes). The decompression's
//! extra memory is the demanding server's minus the no-op's.

use bytes::Bytes;
use prost::Message;
use tokio::task::JoinSet;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_hotpath::stats::CombinedLayer;
use tonic_hotpath::stats::compression::Encoding;
use tower::layer::util::Identity;

use crate::measure::{self, Demanding, delta, kib, peak_bytes, reset_peak, settled};
use support::compression::compress;
use support::stacks::junk::{grpc_request, h2_connect, h2_exchange};
use support::stacks::{ServerLayer, UNARY_PATH, frame, serve};
use support::stats_harness::Noop;
use support::{EchoRequest, EchoServer, EchoService};

/// Streams in flight at once.
const STREAMS: usize = 1_000;
/// Connections they are spread over.
const CONNECTIONS: usize = 10;
/// The server's decode limit (tonic's `max_decoding_message_size`, and
/// the layer's `max_message_len` to match): small, so that 2 000
/// decompressions up to it take little time in a debug build.
const LIMIT: usize = 64 * 1024;
/// What each message inflates to: 16 times the limit.
const INFLATED: usize = 16 * LIMIT;

/// What one thread's decoders may hold (`stats::compression`: an 8 KiB
/// output buffer, flate2's inflate state of some 40 KiB, a spill buffer of
/// at most one 32 KiB input window), with room to spare.
const PER_THREAD: usize = 128 * 1024;
/// The threads that run the layer: the runtime's workers, and the thread
/// that blocks on the test (it polls nothing of the server, counted to be
/// safe).
const THREADS: usize = measure::WORKERS + 1;
/// Room for what moves between floods of the same server (how many
/// streams happen to be in flight together at the peak): 2 KiB a stream.
/// One decoder kept per stream would be 40 KiB a stream.
const NOISE: usize = STREAMS * 2 * 1024;

/// One gzip message frame (flag 1) of an `EchoRequest` whose message is
/// [`INFLATED`] bytes: about a kilobyte on the wire.
fn inflating_frame() -> Bytes {
    let message = EchoRequest {
        message: "a".repeat(INFLATED),
    }
    .encode_to_vec();
    frame(1, &compress(Encoding::Gzip, &message))
}

/// The echo server, accepting gzip, with the decode limit [`LIMIT`].
fn routes() -> Routes {
    Routes::new(
        EchoServer::new(EchoService)
            .accept_compressed(CompressionEncoding::Gzip)
            .max_decoding_message_size(LIMIT),
    )
}

/// What one flood of one server showed.
#[derive(Debug)]
struct Flood {
    /// Bytes live before it (the server up, the clients not yet connected).
    baseline: usize,
    /// The most bytes live during it.
    peak: usize,
    /// Bytes live after it, the server stopped and the connections closed.
    after: usize,
    /// Each stream's `grpc-status` (`None`: none came).
    codes: Vec<Option<i32>>,
}

impl Flood {
    fn peak_over_baseline(&self) -> i64 {
        delta(self.peak, self.baseline)
    }

    fn retained(&self) -> i64 {
        delta(self.after, self.baseline)
    }
}

/// Serves [`routes`] behind `layer`, sends it [`STREAMS`] gzip streams at
/// once over [`CONNECTIONS`] connections, and stops it.
async fn flood<L: ServerLayer<Routes>>(layer: L, message: &Bytes) -> Flood {
    let (addr, incoming) = support::bind().await;
    let server = serve(Server::builder(), layer, routes(), incoming);
    let baseline = settled().await;
    reset_peak();
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        clients.push(h2_connect(addr).await);
    }
    let mut streams = JoinSet::new();
    for (n, client) in clients.iter().cycle().take(STREAMS).enumerate() {
        let mut request = grpc_request(UNARY_PATH, "application/grpc");
        request
            .headers_mut()
            .insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
        let exchange = h2_exchange(client.clone(), request, message.clone());
        streams.spawn(async move { (n, exchange.await.grpc_status()) });
    }
    drop(clients);
    let mut codes = vec![None; STREAMS];
    while let Some(done) = streams.join_next().await {
        let (n, code) = done.expect("stream task");
        codes[n] = code;
    }
    let peak = peak_bytes();
    server.abort();
    let after = settled().await;
    Flood {
        baseline,
        peak,
        after,
        codes,
    }
}

/// The least peak and the most retained of several floods of one server
/// (the peak moves with how many streams happen to be in flight together;
/// the least of three is steadier than any one), and the codes of each.
#[derive(Debug, Default)]
struct Floods {
    peak: Option<i64>,
    retained: Option<i64>,
    baseline: usize,
    codes: Vec<Vec<Option<i32>>>,
}

impl Floods {
    fn add(&mut self, flood: Flood) {
        let peak = flood.peak_over_baseline();
        self.peak = Some(self.peak.map_or(peak, |least| least.min(peak)));
        let retained = flood.retained();
        self.retained = Some(self.retained.map_or(retained, |most| most.max(retained)));
        self.baseline = flood.baseline;
        self.codes.push(flood.codes);
    }

    fn peak(&self) -> i64 {
        self.peak.unwrap_or_default()
    }

    fn retained(&self) -> i64 {
        self.retained.unwrap_or_default()
    }

    fn print(&self, name: &str) {
        eprintln!(
            "inflate: {name:<22} baseline {:>5.0} KiB, peak +{:>6.0} KiB (least of {ROUNDS}), \
             retained {:>+5.0} KiB (most of {ROUNDS})",
            kib(self.baseline),
            kib(self.peak()),
            kib(self.retained()),
        );
    }
}

/// Floods of each server, taken in turns.
const ROUNDS: usize = 3;

#[test]
fn gzip_bombs_cost_the_layer_per_thread_not_per_stream() {
    let _serial = measure::serial();
    measure::runtime().block_on(async {
        let message = inflating_frame();
        // Warms the process (runtime, h2, tonic) so the first measured
        // flood pays nothing the others do not.
        flood(Identity::new(), &message).await;

        let handler = std::sync::Arc::new(Demanding::<false>::default());
        let (mut tonic, mut noop, mut sizes) = Default::default();
        for _ in 0..ROUNDS {
            Floods::add(&mut tonic, flood(Identity::new(), &message).await);
            let layer = CombinedLayer::server().max_message_len(LIMIT as u32);
            Floods::add(&mut noop, flood(layer.clone().with(Noop), &message).await);
            let layer = layer.with(std::sync::Arc::clone(&handler));
            Floods::add(&mut sizes, flood(layer, &message).await);
        }
        let (tonic, noop, sizes): (Floods, Floods, Floods) = (tonic, noop, sizes);
        tonic.print("no layer");
        noop.print("layer, no-op handler");
        sizes.print("layer, sizes handler");
        let extra_peak = sizes.peak() - noop.peak();
        let extra_retained = sizes.retained() - noop.retained();
        eprintln!(
            "inflate: sizes vs no-op: peak {:+.0} KiB ({:+.2} KiB a stream), retained {:+.0} KiB; \
             bounds: retained {:.0} KiB ({THREADS} threads x {:.0} KiB), peak {:.0} KiB (+ {:.0} KiB)",
            kib(extra_peak),
            kib(extra_peak) / STREAMS as f64,
            kib(extra_retained),
            kib(THREADS * PER_THREAD),
            kib(PER_THREAD),
            kib(THREADS * PER_THREAD + NOISE),
            kib(NOISE),
        );

        // tonic's own verdict on a message that inflates past its limit.
        let exhausted = Some(Code::ResourceExhausted as i32);
        let tonic_codes = &tonic.codes[0];
        assert!(
            tonic_codes.iter().all(|code| *code == exhausted),
            "tonic alone: {:?}",
            tonic_codes.iter().find(|code| **code != exhausted)
        );
        // The same for every stream of every flood, with and without the
        // layer, and the layer's `End` says so too.
        for (name, floods) in [("no layer", &tonic), ("no-op", &noop), ("sizes", &sizes)] {
            for codes in &floods.codes {
                assert_eq!(codes, tonic_codes, "{name}");
            }
        }
        assert_eq!(handler.ended(Code::ResourceExhausted), ROUNDS * STREAMS);
        assert_eq!(handler.ended_total(), ROUNDS * STREAMS);

        // The bound: the decompression's extra memory is the decoders of
        // the threads that run the layer, not a decoder (or an output
        // buffer) per stream.
        assert!(
            extra_retained <= (THREADS * PER_THREAD) as i64,
            "retained {extra_retained} bytes more than the no-op layer"
        );
        assert!(
            extra_peak <= (THREADS * PER_THREAD + NOISE) as i64,
            "peak {extra_peak} bytes more than the no-op layer"
        );
    });
}
