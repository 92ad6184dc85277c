//! The instruments of gRFC A66: names, units, descriptions, and its bucket
//! boundaries as instrument advice (an SDK view may override them); and
//! the [`Handle`]s each attribute set keeps to them.

use opentelemetry::metrics::{Counter, Histogram, Meter};

use super::bound::{Handle, Recorder};
use crate::stats::Side;

/// A66's latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 41] = [
    0.0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005,
    0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16,
    0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];

/// A66's size buckets, in bytes.
const SIZE_BUCKETS: [f64; 14] = [
    0.0,
    1024.0,
    2048.0,
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
    4294967296.0,
];

/// The server's instruments.
#[derive(Debug)]
pub(super) struct ServerInstruments {
    pub(super) started: Recorder<Counter<u64>>,
    pub(super) duration: Recorder<Histogram<f64>>,
    pub(super) sent: Recorder<Histogram<u64>>,
    pub(super) rcvd: Recorder<Histogram<u64>>,
}

impl ServerInstruments {
    /// The instruments of `meter`, recording through bound instruments if
    /// `binds` (see [`Recorder`]).
    pub(super) fn new(meter: &Meter, binds: bool) -> Self {
        let started = meter
            .u64_counter("grpc.server.call.started")
            .with_unit("{call}")
            .with_description(
                "The total number of RPCs started, including those that have not completed.",
            )
            .build();
        Self {
            started: Recorder::new(started, binds),
            duration: latency(
                meter,
                "grpc.server.call.duration",
                "End-to-end time taken to complete a call from server transport's perspective.",
                binds,
            ),
            sent: size(
                meter,
                "grpc.server.call.sent_total_compressed_message_size",
                "Compressed message bytes sent per server call.",
                binds,
            ),
            rcvd: size(
                meter,
                "grpc.server.call.rcvd_total_compressed_message_size",
                "Compressed message bytes received per server call.",
                binds,
            ),
        }
    }
}

/// The client's instruments (per attempt, and per call).
#[derive(Debug)]
pub(super) struct ClientInstruments {
    pub(super) attempt_started: Recorder<Counter<u64>>,
    pub(super) attempt_duration: Recorder<Histogram<f64>>,
    pub(super) attempt_sent: Recorder<Histogram<u64>>,
    pub(super) attempt_rcvd: Recorder<Histogram<u64>>,
    pub(super) call_duration: Recorder<Histogram<f64>>,
}

impl ClientInstruments {
    /// The instruments of `meter`, recording through bound instruments if
    /// `binds` (see [`Recorder`]).
    pub(super) fn new(meter: &Meter, binds: bool) -> Self {
        let attempt_started = meter
            .u64_counter("grpc.client.attempt.started")
            .with_unit("{attempt}")
            .with_description("Number of client call attempts started.")
            .build();
        Self {
            attempt_started: Recorder::new(attempt_started, binds),
            attempt_duration: latency(
                meter,
                "grpc.client.attempt.duration",
                "End-to-end time taken to complete a client call attempt.",
                binds,
            ),
            attempt_sent: size(
                meter,
                "grpc.client.attempt.sent_total_compressed_message_size",
                "Compressed message bytes sent per client call attempt.",
                binds,
            ),
            attempt_rcvd: size(
                meter,
                "grpc.client.attempt.rcvd_total_compressed_message_size",
                "Compressed message bytes received per call attempt.",
                binds,
            ),
            call_duration: latency(
                meter,
                "grpc.client.call.duration",
                "Time taken by gRPC to complete an RPC from application's perspective.",
                binds,
            ),
        }
    }
}

fn latency(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
    binds: bool,
) -> Recorder<Histogram<f64>> {
    let histogram = meter
        .f64_histogram(name)
        .with_unit("s")
        .with_description(description)
        .with_boundaries(LATENCY_BUCKETS.to_vec())
        .build();
    Recorder::new(histogram, binds)
}

fn size(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
    binds: bool,
) -> Recorder<Histogram<u64>> {
    let histogram = meter
        .u64_histogram(name)
        .with_unit("By")
        .with_description(description)
        .with_boundaries(SIZE_BUCKETS.to_vec())
        .build();
    Recorder::new(histogram, binds)
}

/// The handles of one `*.started` attribute set (one per side: the
/// server's set is the client's without `grpc.target`).
#[derive(Debug, Default)]
pub(super) struct StartedHandles {
    server: Handle<Counter<u64>>,
    client: Handle<Counter<u64>>,
}

impl StartedHandles {
    /// The handle of `side`'s `*.started` counter.
    #[inline]
    pub(super) fn side(&self, side: Side) -> &Handle<Counter<u64>> {
        match side {
            Side::Server => &self.server,
            Side::Client => &self.client,
        }
    }
}

/// The handles of one attribute set recorded at the end of an RPC, to
/// each side's instruments.
#[derive(Debug, Default)]
pub(super) struct EndedHandles {
    pub(super) server: ServerEndedHandles,
    pub(super) client: ClientEndedHandles,
}

/// The handles of a server's attribute set recorded at `End`, one per
/// [`ServerInstruments`] histogram.
#[derive(Debug, Default)]
pub(super) struct ServerEndedHandles {
    pub(super) duration: Handle<Histogram<f64>>,
    pub(super) sent: Handle<Histogram<u64>>,
    pub(super) rcvd: Handle<Histogram<u64>>,
}

/// The handles of a client's attribute set recorded at `End`, one per
/// [`ClientInstruments`] histogram.
#[derive(Debug, Default)]
pub(super) struct ClientEndedHandles {
    pub(super) attempt_duration: Handle<Histogram<f64>>,
    pub(super) attempt_sent: Handle<Histogram<u64>>,
    pub(super) attempt_rcvd: Handle<Histogram<u64>>,
    pub(super) call_duration: Handle<Histogram<f64>>,
}
