//! `scale`: what the layers cost per RPC as threads are added (issue #19).
//! Not criterion: a harness that prints Markdown tables, in two parts.
//!
//! - **In process** ([`in_process`]): each layered service is built once
//!   over tonic's `Routes` with `tonic_health`'s service; N OS threads,
//!   each on its own current-thread runtime, call
//!   `/grpc.health.v1.Health/Check` through it, cloning it per request as
//!   hyper-util does. Per cell (thread count × mode): thread CPU time per
//!   RPC and its ratio to `bare` at the same thread count, wall time per
//!   RPC, and context switches per 1 000 RPCs (voluntary ones are threads
//!   blocking). Modes interleave within each round, their order rotated
//!   per round; each cell is the median over rounds.
//! - **Loopback** ([`loopback`]): a tonic server and client on two
//!   multi-threaded runtimes, C connections × K calls in flight: RPC/s,
//!   p50/p99 latency and CPU per RPC with and without the layers, the
//!   overhead in % of RPC/s.
//!
//! `cargo bench --features otel --bench scale` runs both with the
//! defaults below. As one prebuilt binary on another machine (no cargo,
//! no criterion): `cargo bench --features otel --bench scale --no-run`
//! prints the path (`target/release/deps/scale-<hash>`); copy it and run
//! `scale-<hash> --bench`. Without `--bench` (as `cargo test --benches`
//! runs it) it makes a short smoke run.
//!
//! Knobs (environment variables):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `SCALE_PARTS` | `in-process,loopback` | which parts to run |
//! | `SCALE_THREADS` | 1, 2, 4, … and the CPU count | thread counts (in process) |
//! | `SCALE_RPCS` | 20000 | timed RPCs per thread per cell |
//! | `SCALE_ROUNDS` | 5 | in-process rounds |
//! | `SCALE_MODES` | all | in-process modes by key (`bare` always runs): `noop1,noop2,channelz,count2,otel-sdk,otel-tenant,otel-noop,otel-tenant-noop,peer,require-org,tenant-limit,tenant-limit-many,adaptive,set-org,throttle`, with feature `binlog` `binlog-excluded,binlog-logged,binlog-file,operator`, with feature `orca` `orca-untouched,orca-records` |
//! | `SCALE_LB_SECS` | 2 | loopback: measured seconds per mode per round |
//! | `SCALE_LB_WARMUP` | 0.5 | loopback: warm-up seconds before each window |
//! | `SCALE_LB_ROUNDS` | 3 | loopback rounds |
//! | `SCALE_LB_CONNS` | 4 | loopback connections |
//! | `SCALE_LB_IN_FLIGHT` | 32 | loopback calls in flight per connection |
//! | `SCALE_LB_SERVER_THREADS` | half the CPUs (at least 1) | server runtime workers |
//! | `SCALE_LB_CLIENT_THREADS` | the other half (at least 1) | client runtime workers |

#[path = "scale/clock.rs"]
mod clock;
#[path = "scale/in_process.rs"]
mod in_process;
#[path = "scale/loopback.rs"]
mod loopback;
#[path = "scale/table.rs"]
mod table;

use support::limits::operator;
#[cfg(feature = "orca")]
use support::orca::records;

use std::str::FromStr;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print_help();
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` does not.
    let full = args.iter().any(|a| a == "--bench");
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);

    let parts =
        env_list("SCALE_PARTS").unwrap_or_else(|| vec!["in-process".into(), "loopback".into()]);
    for part in &parts {
        assert!(
            matches!(part.as_str(), "in-process" | "loopback"),
            "SCALE_PARTS: unknown part {part:?} (in-process, loopback)"
        );
    }
    let in_process = in_process::Settings {
        threads: env_list("SCALE_THREADS")
            .map(|list| list.iter().map(|t| parse("SCALE_THREADS", t)).collect())
            .unwrap_or_else(|| {
                if full {
                    thread_counts(cpus)
                } else {
                    vec![1, 2]
                }
            }),
        rpcs: env("SCALE_RPCS").unwrap_or(if full { 20_000 } else { 200 }),
        rounds: env("SCALE_ROUNDS").unwrap_or(if full { 5 } else { 1 }),
    };
    let server_threads = env("SCALE_LB_SERVER_THREADS").unwrap_or((cpus / 2).max(1));
    let loopback = loopback::Settings {
        server_threads,
        client_threads: env("SCALE_LB_CLIENT_THREADS")
            .unwrap_or(cpus.saturating_sub(server_threads).max(1)),
        connections: env("SCALE_LB_CONNS").unwrap_or(4),
        in_flight: env("SCALE_LB_IN_FLIGHT").unwrap_or(32),
        warm_up: seconds(env("SCALE_LB_WARMUP").unwrap_or(if full { 0.5 } else { 0.1 })),
        window: seconds(env("SCALE_LB_SECS").unwrap_or(if full { 2.0 } else { 0.2 })),
        rounds: env("SCALE_LB_ROUNDS").unwrap_or(if full { 3 } else { 1 }),
    };
    assert!(
        in_process.threads.iter().all(|&t| t > 0) && in_process.rpcs > 0 && in_process.rounds > 0,
        "thread counts, RPCs and rounds must be positive"
    );
    assert!(
        loopback.connections > 0 && loopback.in_flight > 0 && loopback.rounds > 0,
        "connections, calls in flight and rounds must be positive"
    );

    print_machine(cpus);
    if !full {
        println!("(smoke run: pass --bench for the real one)");
    }
    let providers = in_process::Providers::new();
    if parts.iter().any(|p| p == "in-process") {
        let mut modes = in_process::modes(&providers);
        if let Some(keys) = env_list("SCALE_MODES") {
            for key in &keys {
                assert!(
                    modes.iter().any(|m| m.key == key),
                    "SCALE_MODES: unknown mode {key:?}"
                );
            }
            modes.retain(|m| m.key == "bare" || keys.contains(&m.key.to_owned()));
        }
        println!(
            "in process: threads {:?}, {} RPCs per thread per cell, {} rounds",
            in_process.threads, in_process.rpcs, in_process.rounds
        );
        in_process::run(&in_process, &modes);
    }
    if parts.iter().any(|p| p == "loopback") {
        loopback::run(&loopback, &providers);
    }
}

/// Prints this file's module docs (what runs, the knobs).
fn print_help() {
    for line in include_str!("scale.rs").lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        println!("{}", doc.strip_prefix(' ').unwrap_or(doc));
    }
}

/// 1, 2, 4, … up to `cpus`, and `cpus` itself when it is not a power of 2.
fn thread_counts(cpus: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
        .take_while(|&n| n <= cpus)
        .collect();
    if counts.last() != Some(&cpus) {
        counts.push(cpus);
    }
    counts
}

/// The machine the figures come from.
fn print_machine(cpus: usize) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown", |(_, model)| model.trim());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "machine: {cpus} CPUs available (available_parallelism), {model}; load average {load}"
    );
}

fn env_list(name: &str) -> Option<Vec<String>> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

fn env<T: FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().map(|value| parse(name, &value))
}

fn parse<T: FromStr>(name: &str, value: &str) -> T {
    value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}: cannot read {value:?}"))
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}
