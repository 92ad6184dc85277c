//! `binlog` bench: what binary logging (`BinaryLog`, gRFC A16) costs per
//! RPC on the server stack in process (single thread, unary echo with a
//! small message, `Routes` + layer, body driven to trailers), beside no
//! layer and a no-op handler:
//!
//! - `no_layer`: the echo routes alone (the baseline of every ratio);
//! - `noop_handler`: `CombinedLayer::server()` with a handler that asks
//!   for nothing (`PAYLOAD_TIMES = false`);
//! - `noop_handler_message_data`: the same handler asking for what
//!   `BinaryLog` asks the layer for (`MESSAGE_DATA`, `HALF_CLOSE`), and
//!   nothing else: the stats layer's part of the logger's cost;
//! - `binlog_excluded`: `BinaryLog` whose filter excludes the echo method
//!   (`other.Service/*,-hotpath.echo.Echo/UnaryEcho`): one filter lookup
//!   per RPC, nothing logged, nothing shared written;
//! - `binlog_logged_discard`: `BinaryLog` logging every call (`*`) to a
//!   sink of this bench that takes whole buffers of framed entries,
//!   counts the bytes and keeps nothing (no disk);
//! - `binlog_logged_dev_null`: the same to a `FileSink` on `/dev/null`
//!   (grpc-go's framing: encoding, the sink's buffer, and its `write`
//!   calls, no disk).
//!
//! First interleaved (as [`interleaved`] does): rounds of 1 000 calls per
//! variant in turn, each variant's fastest round and its ratio to
//! `no_layer` in the same run; beside it the process's CPU time per call
//! (median round), which includes the log's writer thread: a logged
//! round ends once the writer has taken every entry of the round
//! (written or dropped), so its CPU counts there. Then criterion rows of
//! one group, `binlog/unary_in_process`, each after its allocations per
//! RPC (counted on the calling thread: the writer thread frees the
//! buffers). What became of the logged entries (written, dropped when
//! the buffers were full) is printed at the end of each part.
//!
//! A second group, `binlog/unary_gzip_64k_in_process`, makes the no
//! layer, no-op, excluded and logged (discarding) rows with a 64 KiB
//! request arriving gzip-compressed (`server_gzip` in `benches/otel.rs`):
//! a layer whose handlers ask for message bytes decompresses every
//! compressed message, selected by the filter or not.
//!
//! `cargo bench --features binlog --bench binlog -- --warm-up-time 1 --measurement-time 3`
//! (BENCHMARKS.md runs it with glibc's heap trimming off, for the gzip
//! rows.)

#[path = "gzip_call/mod.rs"]
mod gzip_call;
#[path = "in_process/mod.rs"]
mod in_process;
#[path = "interleaved/mod.rs"]
mod interleaved;
use support::stats_harness;

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use gzip_call::{gzip_request, gzip_routes};
use in_process::{CALLS_PER_ROUND, MakeRequest, service_in_process, service_round_with};
use interleaved::Round;
use stats_harness::{Noop, UNARY_PATH, current_thread_runtime, layered_echo_routes, unary_request};
use support::alloc_count::CountingAllocator;
use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{BinaryLog, FileSink, Filter, Framing, Sink};
use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
use tower::layer::util::Identity;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Interleaved rounds per variant.
const ROUNDS: usize = 100;

/// Excludes the echo method (one method clause, an exclusion) and logs
/// another service: the echo calls' lookup finds the exclusion.
const EXCLUDING_FILTER: &str = "other.Service/*,-hotpath.echo.Echo/UnaryEcho";

/// A no-op handler asking the layer for what `BinaryLog` asks for:
/// message bytes and the client's half-close.
#[derive(Debug, Default, Clone, Copy)]
struct DataNoop;

impl StatsHandler for DataNoop {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;
    const MESSAGE_DATA: bool = true;
    const HALF_CLOSE: bool = true;
}

/// A sink that takes whole buffers of framed entries (grpc-go's
/// framing), counts the bytes and keeps nothing: what a sink costs
/// without the disk.
#[derive(Debug, Default)]
struct Discard {
    bytes: u64,
}

impl Sink for Discard {
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
        self.bytes += Framing::Grpc.framed_len(entry) as u64;
        Ok(())
    }

    fn framing(&self) -> Option<Framing> {
        Some(Framing::Grpc)
    }

    fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
        self.bytes += black_box(entries).len() as u64;
        Ok(())
    }
}

/// Makes a row's log.
type MakeLog = fn() -> BinaryLog;

fn excluded() -> BinaryLog {
    let filter = Filter::parse(EXCLUDING_FILTER).expect("valid filter");
    assert_eq!(
        filter.lookup(UNARY_PATH),
        None,
        "the echo method is excluded"
    );
    BinaryLog::builder(filter, Discard::default())
        .build()
        .expect("writer thread")
}

fn logged_discard() -> BinaryLog {
    BinaryLog::builder(Filter::all(), Discard::default())
        .build()
        .expect("writer thread")
}

fn logged_dev_null() -> BinaryLog {
    let sink = FileSink::create("/dev/null", Framing::Grpc).expect("open /dev/null");
    BinaryLog::builder(Filter::all(), sink)
        .build()
        .expect("writer thread")
}

/// Entries the log has taken off its queue so far: written, dropped or
/// failed.
fn settled(log: &BinaryLog) -> u64 {
    let counts = log.counts();
    counts.written + counts.dropped + counts.failed
}

/// Waits until the log has settled `expected` entries (its writer thread
/// has caught up with the calls made so far).
fn wait_for(log: &BinaryLog, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while settled(log) < expected {
        assert!(Instant::now() < deadline, "the binary log's writer stalled");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Entries one echo call logs, read off the log after `calls` calls made
/// on a fresh log (waiting until its count stops changing).
fn entries_per_call(log: &BinaryLog, calls: u64) -> u64 {
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = settled(log);
        if now == last {
            break;
        }
        last = now;
    }
    assert_eq!(last % calls, 0, "{last} entries from {calls} calls");
    last / calls
}

/// The process's CPU time (every thread: the log's writer included).
fn process_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// A timed round through `service` whose log, when there is one, is
/// waited for after the timed calls (outside the wall time, inside the
/// process CPU time taken around the round).
fn logged_round<'a, S, B>(
    rt: &'a tokio::runtime::Runtime,
    service: S,
    request: MakeRequest,
    log: Option<&'a BinaryLog>,
) -> Round<'a>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>> + Clone + 'a,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    // Warm-up (and, with a log, how many entries a call logs).
    rt.block_on(async {
        let body = stats_harness::unary_body("hello");
        for _ in 0..100 {
            let status = stats_harness::call_in_process(&service, request(&body)).await;
            assert_eq!(status, Some(0), "the echo call answers OK");
        }
    });
    let mut round = service_round_with(rt, service, request);
    let Some(log) = log else {
        return round;
    };
    let per_call = entries_per_call(log, 100);
    let mut expected = 100 * per_call;
    Box::new(move || {
        let time = round();
        expected += u64::from(CALLS_PER_ROUND) * per_call;
        wait_for(log, expected);
        time
    })
}

fn print_counts(label: &str, name: &str, log: &BinaryLog) {
    log.shutdown().expect("the sink's writes");
    let counts = log.counts();
    println!(
        "binlog {label}  {name:<26} entries written {}, dropped (buffers full) {}, failed {}",
        counts.written, counts.dropped, counts.failed
    );
}

/// Runs `variants` interleaved (each round every variant in turn) and
/// prints, per call, each variant's fastest round (wall time of the
/// calling thread) and the process's CPU time in its median round, each
/// with its ratio to the first variant (no layer).
fn print_interleaved(label: &str, variants: &mut [(&str, Round<'_>)], rounds: usize) {
    let mut wall = vec![Vec::with_capacity(rounds); variants.len()];
    let mut cpu = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in variants.iter_mut().enumerate() {
            let before = process_cpu();
            wall[i].push(run());
            cpu[i].push(process_cpu().saturating_sub(before));
        }
    }
    let per_call = |d: Duration| d.as_nanos() as f64 / f64::from(CALLS_PER_ROUND);
    let mut baseline = None;
    for (((name, _), wall), cpu) in variants.iter().zip(&mut wall).zip(&mut cpu) {
        wall.sort_unstable();
        cpu.sort_unstable();
        let fastest = per_call(wall[0]);
        let median = per_call(wall[rounds / 2]);
        let cpu = per_call(cpu[rounds / 2]);
        let (base_wall, base_cpu) = *baseline.get_or_insert((fastest, cpu));
        println!(
            "interleaved {label}  {name:<26} {fastest:>9.1} ns/call (median {median:>9.1}) {:>5.2}x no layer  \
             process CPU {cpu:>9.1} ns/call {:>5.2}x",
            fastest / base_wall,
            cpu / base_cpu,
        );
    }
}

/// The small unary call, interleaved.
fn interleaved_small() {
    let rt = current_thread_runtime();
    let logs = [
        ("binlog_excluded", excluded()),
        ("binlog_logged_discard", logged_discard()),
        ("binlog_logged_dev_null", logged_dev_null()),
    ];
    let [(_, excluded), (_, discard), (_, dev_null)] = &logs;
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", small_round(&rt, Identity::new(), None)),
        (
            "noop_handler",
            small_round(&rt, CombinedLayer::server().with(Noop), None),
        ),
        (
            "noop_handler_message_data",
            small_round(&rt, CombinedLayer::server().with(DataNoop), None),
        ),
        (
            "binlog_excluded",
            small_round(&rt, CombinedLayer::server().with(excluded.clone()), None),
        ),
        (
            "binlog_logged_discard",
            small_round(
                &rt,
                CombinedLayer::server().with(discard.clone()),
                Some(discard),
            ),
        ),
        (
            "binlog_logged_dev_null",
            small_round(
                &rt,
                CombinedLayer::server().with(dev_null.clone()),
                Some(dev_null),
            ),
        ),
    ];
    print_interleaved("in-process server", &mut variants, ROUNDS);
    drop(variants);
    for (name, log) in &logs {
        print_counts("interleaved", name, log);
    }
}

/// [`logged_round`] of the small unary call through the echo routes under
/// `layer`.
fn small_round<'a, L, B>(
    rt: &'a tokio::runtime::Runtime,
    layer: L,
    log: Option<&'a BinaryLog>,
) -> Round<'a>
where
    L: tower::Layer<tonic::service::Routes>,
    L::Service:
        tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>> + Clone + 'a,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    logged_round(rt, layered_echo_routes(layer), unary_request, log)
}

fn unary_in_process(c: &mut Criterion) {
    interleaved_small();
    let rt = current_thread_runtime();
    let mut group = c.benchmark_group("binlog/unary_in_process");
    let g = &mut group;
    let rows: [(&str, MakeLog); 3] = [
        ("binlog_excluded", excluded),
        ("binlog_logged_discard", logged_discard),
        ("binlog_logged_dev_null", logged_dev_null),
    ];
    let service = layered_echo_routes(Identity::new());
    service_in_process(g, &rt, "no_layer", service, unary_request);
    let service = layered_echo_routes(CombinedLayer::server().with(Noop));
    service_in_process(g, &rt, "noop_handler", service, unary_request);
    let service = layered_echo_routes(CombinedLayer::server().with(DataNoop));
    service_in_process(g, &rt, "noop_handler_message_data", service, unary_request);
    for (name, make) in rows {
        let log = make();
        let service = layered_echo_routes(CombinedLayer::server().with(log.clone()));
        service_in_process(g, &rt, name, service, unary_request);
        print_counts("criterion", name, &log);
    }
    group.finish();
}

// ---- a compressed call: gzip, 64 KiB ----

/// A unary call whose 64 KiB request arrives gzip-compressed (as
/// `server_gzip` in `benches/otel.rs`), interleaved (30 rounds), then as
/// criterion rows of `binlog/unary_gzip_64k_in_process`. A layer whose
/// handlers ask for message bytes (`MESSAGE_DATA`) decompresses every
/// compressed message beside tonic's decoder, whether or not the handler
/// then uses the bytes: the `binlog_excluded` row shows what that costs a
/// call the filter does not log.
fn unary_gzip(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let logs = [
        ("binlog_excluded", excluded()),
        ("binlog_logged_discard", logged_discard()),
    ];
    let [(_, excluded_log), (_, discard_log)] = &logs;
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        (
            "no_layer",
            logged_round(&rt, gzip_routes(Identity::new()), gzip_request, None),
        ),
        (
            "noop_handler",
            logged_round(
                &rt,
                gzip_routes(CombinedLayer::server().with(Noop)),
                gzip_request,
                None,
            ),
        ),
        (
            "binlog_excluded",
            logged_round(
                &rt,
                gzip_routes(CombinedLayer::server().with(excluded_log.clone())),
                gzip_request,
                None,
            ),
        ),
        (
            "binlog_logged_discard",
            logged_round(
                &rt,
                gzip_routes(CombinedLayer::server().with(discard_log.clone())),
                gzip_request,
                Some(discard_log),
            ),
        ),
    ];
    print_interleaved("gzip 64 KiB server", &mut variants, 30);
    drop(variants);
    for (name, log) in &logs {
        print_counts("interleaved gzip", name, log);
    }

    let mut group = c.benchmark_group("binlog/unary_gzip_64k_in_process");
    let g = &mut group;
    let service = gzip_routes(Identity::new());
    service_in_process(g, &rt, "no_layer", service, gzip_request);
    let service = gzip_routes(CombinedLayer::server().with(Noop));
    service_in_process(g, &rt, "noop_handler", service, gzip_request);
    let rows: [(&str, MakeLog); 2] = [
        ("binlog_excluded", excluded),
        ("binlog_logged_discard", logged_discard),
    ];
    for (name, make) in rows {
        let log = make();
        let service = gzip_routes(CombinedLayer::server().with(log.clone()));
        service_in_process(g, &rt, name, service, gzip_request);
        print_counts("criterion gzip", name, &log);
    }
    group.finish();
}

criterion_group!(benches, unary_in_process, unary_gzip);
criterion_main!(benches);
