//! The two stats handlers every instrumented side runs, side by side in one
//! `CombinedLayer`: per-method metrics and a per-RPC event log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tonic::Code;
use tonic_hotpath::stats::{
    ClientSide, Combined, CombinedLayer, RpcEvent, RpcInfo, ServerSide, Side, StatsHandler,
};

/// Locks `mutex`, carrying on after a panic elsewhere (the data is plain
/// counters, never left half-updated).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The short method name: `/echo.Echo/UnaryEcho` → `UnaryEcho`.
fn short_method(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Totals for one method on one side.
#[derive(Debug, Clone, Default)]
pub struct MethodStats {
    /// RPCs that ended.
    pub calls: u64,
    /// Messages received.
    pub messages_in: u64,
    /// Messages sent.
    pub messages_out: u64,
    /// Message bytes received (without gRPC's 5-byte prefix).
    pub bytes_in: u64,
    /// Message bytes sent.
    pub bytes_out: u64,
    /// Every RPC's latency, Begin to End (sorted on read).
    pub latencies: Vec<Duration>,
    /// How many RPCs ended with each status code.
    pub codes: BTreeMap<String, u64>,
}

impl MethodStats {
    /// The `p`-th percentile latency (nearest rank), `p` in 0..=100.
    pub fn percentile(&self, p: u32) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (sorted.len() * p as usize).div_ceil(100).max(1);
        sorted[rank - 1]
    }

    /// How many RPCs ended with `code`.
    pub fn code_count(&self, code: Code) -> u64 {
        self.codes.get(&format!("{code:?}")).copied().unwrap_or(0)
    }
}

/// Per-RPC counters, folded into the method's totals at `End`.
#[derive(Debug, Default)]
pub struct RpcCounters {
    method: String,
    messages_in: u64,
    messages_out: u64,
    bytes_in: u64,
    bytes_out: u64,
}

/// Keeps per-method calls, messages, bytes, latencies and status codes.
#[derive(Debug, Default)]
pub struct Metrics {
    methods: Mutex<BTreeMap<String, MethodStats>>,
}

impl Metrics {
    /// A copy of the per-method totals, by short method name.
    pub fn snapshot(&self) -> BTreeMap<String, MethodStats> {
        lock(&self.methods).clone()
    }
}

impl StatsHandler for Metrics {
    type RpcState = RpcCounters;
    type ConnState = ();

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> RpcCounters {
        RpcCounters {
            method: short_method(info.method).to_owned(),
            ..RpcCounters::default()
        }
    }

    fn handle_rpc(&self, rpc: &mut RpcCounters, event: &RpcEvent<'_>) {
        match event {
            RpcEvent::InPayload(payload) => {
                rpc.messages_in += 1;
                rpc.bytes_in += u64::from(payload.compressed_length);
            }
            RpcEvent::OutPayload(payload) => {
                rpc.messages_out += 1;
                rpc.bytes_out += u64::from(payload.compressed_length);
            }
            RpcEvent::End(end) => {
                let mut methods = lock(&self.methods);
                let totals = methods.entry(std::mem::take(&mut rpc.method)).or_default();
                totals.calls += 1;
                totals.messages_in += rpc.messages_in;
                totals.messages_out += rpc.messages_out;
                totals.bytes_in += rpc.bytes_in;
                totals.bytes_out += rpc.bytes_out;
                totals.latencies.push(end.end_time - end.begin_time);
                *totals.codes.entry(format!("{:?}", end.code)).or_default() += 1;
            }
            _ => {}
        }
    }
}

/// One RPC's events, as logged.
#[derive(Debug, Clone, Default)]
pub struct RpcLog {
    /// `client` or `server`, and the method.
    pub rpc: String,
    /// Each event, in order, with its details.
    pub events: Vec<String>,
}

#[derive(Debug, Default)]
struct LogState {
    first: Option<RpcLog>,
    rpcs: u64,
    event_counts: BTreeMap<&'static str, u64>,
}

/// Records every RPC's events: the first RPC's sequence in full, then
/// counts per event kind (so the output stays readable).
#[derive(Debug, Default)]
pub struct EventLog {
    state: Mutex<LogState>,
}

impl EventLog {
    /// The first RPC's full event sequence, if any RPC ended.
    pub fn first(&self) -> Option<RpcLog> {
        lock(&self.state).first.clone()
    }

    /// RPCs logged, and how many events of each kind they had.
    pub fn counts(&self) -> (u64, BTreeMap<&'static str, u64>) {
        let state = lock(&self.state);
        (state.rpcs, state.event_counts.clone())
    }
}

/// An event's kind and a one-line description of it.
fn describe(event: &RpcEvent<'_>) -> (&'static str, String) {
    match event {
        RpcEvent::Begin { .. } => ("Begin", "Begin".into()),
        RpcEvent::InHeader(headers) => {
            ("InHeader", format!("InHeader ({} headers)", headers.len()))
        }
        RpcEvent::OutHeader(headers) => (
            "OutHeader",
            format!("OutHeader ({} headers)", headers.len()),
        ),
        RpcEvent::InPayload(p) => (
            "InPayload",
            format!("InPayload {} bytes", p.compressed_length),
        ),
        RpcEvent::OutPayload(p) => (
            "OutPayload",
            format!("OutPayload {} bytes", p.compressed_length),
        ),
        RpcEvent::InTrailer(t) => ("InTrailer", format!("InTrailer ({} headers)", t.len())),
        RpcEvent::OutTrailer(t) => ("OutTrailer", format!("OutTrailer ({} headers)", t.len())),
        RpcEvent::End(end) => (
            "End",
            format!(
                "End {:?} after {:.2?}{}",
                end.code,
                end.end_time - end.begin_time,
                end.error.map(|e| format!(" ({e})")).unwrap_or_default()
            ),
        ),
        other => ("Other", format!("{other:?}")),
    }
}

impl StatsHandler for EventLog {
    type RpcState = RpcLog;
    type ConnState = ();

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> RpcLog {
        let side = match info.side {
            Side::Server => "server",
            Side::Client => "client",
        };
        RpcLog {
            rpc: format!("{side} {}", info.method),
            events: Vec::with_capacity(8),
        }
    }

    fn handle_rpc(&self, rpc: &mut RpcLog, event: &RpcEvent<'_>) {
        let (kind, line) = describe(event);
        rpc.events.push(line);
        let mut state = lock(&self.state);
        *state.event_counts.entry(kind).or_default() += 1;
        if let RpcEvent::End(_) = event {
            state.rpcs += 1;
            if state.first.is_none() {
                state.first = Some(std::mem::take(rpc));
            }
        }
    }
}

/// The handlers one instrumented side runs, in registration order.
pub type Handlers = Combined<Arc<Metrics>, Arc<EventLog>>;

/// One side's two handlers, shared between its layer and the report.
#[derive(Debug, Clone, Default)]
pub struct SideStats {
    /// Per-method metrics.
    pub metrics: Arc<Metrics>,
    /// The event log.
    pub log: Arc<EventLog>,
}

impl SideStats {
    /// A server layer feeding both handlers.
    pub fn server_layer(&self) -> CombinedLayer<Handlers, ServerSide> {
        CombinedLayer::server()
            .with(Arc::clone(&self.metrics))
            .with(Arc::clone(&self.log))
    }

    /// A client layer feeding both handlers.
    pub fn client_layer(&self) -> CombinedLayer<Handlers, ClientSide> {
        CombinedLayer::client()
            .with(Arc::clone(&self.metrics))
            .with(Arc::clone(&self.log))
    }
}
