//! grpc-go (v1.85, `interop/orca-go`) against tonic ORCA servers:
//!
//! - grpc-go's own interop client runs its `orca_per_rpc` and `orca_oob`
//!   cases against the tonic `TestService` (served as grpc-go's interop
//!   server is: `CallMetricsLayer`, `OpenRcaService` at a 1 s minimum
//!   interval), reading the reports through the
//!   `test_backend_metrics_load_balancer` policy it registers, and
//!   comparing them with `proto.Equal`: exit status 0 is a pass. Its
//!   basic cases (`empty_unary`, `large_unary`, `ping_pong`, ...) check
//!   that the service answers as grpc-go's does.
//! - grpc-go's `weighted_round_robin` (`interop/orca-go/wrr`) over three
//!   tonic servers reporting different CPU utilizations at equal QPS
//!   splits its calls by the weights `qps / cpu` (per-call trailers, and
//!   out-of-band reports), and over servers that report nothing splits
//!   them evenly.
//!
//! Needs `go` on PATH (and the Go module proxy, or a warm module cache,
//! for the first build); without `go` each test is skipped with a notice
//! (`support::skip`), or fails when `CI` is set.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use support::go_interop;
use support::orca::test_service::{Orca, serve};

/// The service config grpc-go's interop client is run with for the ORCA
/// cases (as gRPC's interop test runner gives it).
const ORCA_TEST_POLICY: &str =
    r#"{"loadBalancingConfig":[{"test_backend_metrics_load_balancer":{}}]}"#;

/// A backstop far past the programs' own deadlines (the interop client's
/// cases give up after 30 s, the WRR driver after 60 s): a hung child is
/// killed and the test fails rather than hangs.
const CHILD_DEADLINE: Duration = Duration::from_secs(120);

/// `go build` of `package` in `interop/orca-go` as `name`, once per test
/// process; `None` (the test is skipped) without `go`.
fn orca_go(name: &'static str, package: &str) -> Option<PathBuf> {
    static BUILT: Mutex<BTreeMap<&'static str, PathBuf>> = Mutex::new(BTreeMap::new());
    if !go_interop::go_available() {
        return None;
    }
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let binary = built
        .entry(name)
        .or_insert_with(|| go_interop::go_build("orca-go", name, &[package]));
    Some(binary.clone())
}

/// grpc-go's interop client (`google.golang.org/grpc/interop/client`).
fn interop_client() -> Option<PathBuf> {
    orca_go(
        "orca-interop-client",
        "google.golang.org/grpc/interop/client",
    )
}

/// The WRR driver (`interop/orca-go/wrr`).
fn wrr_driver() -> Option<PathBuf> {
    orca_go("orca-wrr", "./wrr")
}

/// Runs `binary` with `args` to its end (or kills it at
/// [`CHILD_DEADLINE`]); panics with its output unless it exits 0; returns
/// its stdout.
async fn run_to_success(binary: &PathBuf, args: &[String]) -> String {
    let child = tokio::process::Command::new(binary)
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(CHILD_DEADLINE, child)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} {args:?} still running after {CHILD_DEADLINE:?}",
                binary.display()
            )
        })
        .expect("run the Go program");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{} {args:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        binary.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// grpc-go's interop client's `test_case` against `addr`; panics with its
/// output unless it passes.
async fn interop_case(binary: &PathBuf, addr: SocketAddr, case: &str) {
    run_to_success(
        binary,
        &[
            "-server_host=127.0.0.1".to_owned(),
            format!("-server_port={}", addr.port()),
            format!("-test_case={case}"),
            format!("-service_config_json={ORCA_TEST_POLICY}"),
        ],
    )
    .await;
}

#[tokio::test]
async fn grpc_go_interop_orca_per_rpc() {
    let Some(client) = interop_client() else {
        return;
    };
    let (addr, _recorder) = serve("interop", Orca::Interop).await;
    interop_case(&client, addr, "orca_per_rpc").await;
}

#[tokio::test]
async fn grpc_go_interop_orca_oob() {
    let Some(client) = interop_client() else {
        return;
    };
    let (addr, _recorder) = serve("interop", Orca::Interop).await;
    interop_case(&client, addr, "orca_oob").await;
}

#[tokio::test]
async fn grpc_go_interop_basic_cases_against_the_test_service() {
    // The ORCA cases lean on the service answering as grpc-go's does: these
    // check it on the cases it implements.
    let Some(client) = interop_client() else {
        return;
    };
    let (addr, _recorder) = serve("interop", Orca::Interop).await;
    for case in [
        "empty_unary",
        "large_unary",
        "ping_pong",
        "empty_stream",
        "status_code_and_message",
        "unimplemented_method",
    ] {
        interop_case(&client, addr, case).await;
    }
}

/// What the WRR driver prints.
#[derive(Debug)]
struct Split {
    by_server: BTreeMap<String, u64>,
    calls: u64,
    output: String,
}

impl Split {
    /// The share of the calls `server` answered.
    fn share(&self, server: &str) -> f64 {
        let count = self.by_server.get(server).copied().unwrap_or(0);
        #[allow(clippy::cast_precision_loss)] // a few thousand calls
        let share = count as f64 / self.calls as f64;
        share
    }

    /// Panics unless each server's share is within `tolerance` of its
    /// expected one.
    fn assert_shares(&self, expected: &[(&str, f64)], tolerance: f64) {
        assert_eq!(
            self.by_server.values().sum::<u64>(),
            self.calls,
            "every call answered by a known server: {}",
            self.output
        );
        for (server, want) in expected {
            let got = self.share(server);
            assert!(
                (got - want).abs() <= tolerance,
                "server {server} answered {got:.3} of the calls, want {want:.3} ± {tolerance}: {}",
                self.output
            );
        }
    }
}

/// The calls to make after the warm-up.
const CALLS: u64 = 3000;
/// How far each server's share may be from its weight's: grpc-go's own
/// WRR tests (`checkWeights`) allow a few percent; a machine busy with
/// other builds gets a little more. Ignoring the weights (a third each)
/// misses the 4/7 and 1/7 shares by 0.24 and 0.19.
const TOLERANCE: f64 = 0.05;

/// Runs the WRR driver over `addrs` with `flags`.
async fn wrr(binary: &PathBuf, addrs: &[SocketAddr], flags: &[&str]) -> Split {
    let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let mut args = vec![
        format!("-addrs={}", addrs.join(",")),
        format!("-calls={CALLS}"),
        "-timeout=60s".to_owned(),
    ];
    args.extend(flags.iter().map(|flag| (*flag).to_owned()));
    let output = run_to_success(binary, &args).await;
    println!("wrr {flags:?}: {}", output.trim());
    let json: serde_json::Value = serde_json::from_str(output.trim())
        .unwrap_or_else(|error| panic!("the WRR driver's JSON ({error}): {output}"));
    let by_server = json["by_server"]
        .as_object()
        .unwrap_or_else(|| panic!("by_server in {output}"))
        .iter()
        .map(|(server, count)| (server.clone(), count.as_u64().expect("a count")))
        .collect();
    Split {
        by_server,
        calls: json["calls"].as_u64().expect("calls"),
        output,
    }
}

/// Three servers reporting CPU 0.2, 0.4 and 0.8 at 100 QPS each: weights
/// `qps / cpu` of 500, 250 and 125, shares 4/7, 2/7 and 1/7.
async fn weighted_servers() -> Vec<SocketAddr> {
    let mut addrs = Vec::new();
    for (id, cpu) in [("a", 0.2), ("b", 0.4), ("c", 0.8)] {
        let (addr, recorder) = serve(id, Orca::Reporting).await;
        recorder.set_cpu_utilization(cpu);
        recorder.set_qps(100.0);
        addrs.push(addr);
    }
    addrs
}

const WEIGHTED_SHARES: [(&str, f64); 3] = [("a", 4.0 / 7.0), ("b", 2.0 / 7.0), ("c", 1.0 / 7.0)];
const EVEN_SHARES: [(&str, f64); 3] = [("a", 1.0 / 3.0), ("b", 1.0 / 3.0), ("c", 1.0 / 3.0)];

#[tokio::test]
async fn grpc_go_weighted_round_robin_follows_per_call_reports() {
    let Some(driver) = wrr_driver() else {
        return;
    };
    let addrs = weighted_servers().await;
    let split = wrr(&driver, &addrs, &[]).await;
    split.assert_shares(&WEIGHTED_SHARES, TOLERANCE);
}

#[tokio::test]
async fn grpc_go_weighted_round_robin_follows_oob_reports() {
    let Some(driver) = wrr_driver() else {
        return;
    };
    let addrs = weighted_servers().await;
    let split = wrr(&driver, &addrs, &["-oob", "-oob_period=1s"]).await;
    split.assert_shares(&WEIGHTED_SHARES, TOLERANCE);
}

#[tokio::test]
async fn grpc_go_weighted_round_robin_without_reports_is_even() {
    let Some(driver) = wrr_driver() else {
        return;
    };
    // The same policy over servers that report nothing: no weight is ever
    // usable, so every endpoint gets the mean, as round_robin.
    let mut addrs = Vec::new();
    for id in ["a", "b", "c"] {
        addrs.push(serve(id, Orca::Off).await.0);
    }
    let split = wrr(&driver, &addrs, &["-wait_weights=false"]).await;
    split.assert_shares(&EVEN_SHARES, TOLERANCE);
    // And round_robin over reporting servers ignores their reports.
    let reporting = weighted_servers().await;
    let split = wrr(&driver, &reporting, &["-policy=round_robin"]).await;
    split.assert_shares(&EVEN_SHARES, TOLERANCE);
}
