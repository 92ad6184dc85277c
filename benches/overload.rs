//! `overload`: issue #46's measurements, every contender side by side in
//! one process and one run. Not criterion: a harness that prints one
//! Markdown table per scenario.
//!
//! The server (`support::overload`) has a known capacity: its handler
//! holds one of 8 slots for 5 ms + Exp(5 ms) (seeded), so the machine's
//! own CPU is not what overloads. Load is open-loop (Poisson arrivals),
//! each call with a 100 ms deadline, over rotating HTTP/2 connections.
//! Server and load run on two runtimes of their own (half the CPUs each).
//! Every cell starts a fresh server and replays the same arrivals.
//!
//! - **Baselines**: the capacity is measured as the goodput of the tuned
//!   static limit (`ConcurrencyLimit` + `LoadShed` at 8) at twice the
//!   nominal 800 calls/s; the unloaded p50/p99 as those of no protection
//!   at half that capacity. Loads below are multiples of the measured
//!   capacity.
//! - **Loads**: 0.5×, 1×, 2×, 5×, 10× the capacity, one tenant.
//! - **Two tenants**: one at 12× its share (half the capacity), one at
//!   0.5× its share.
//! - **Six tenants** at 3× the capacity in all, equal shares
//!   (`TenantLimitLayer` at 8 each is 48 over 8 slots).
//! - **Capacity steps**: 8 → 2 → 8 slots under 1.5× the capacity, and the
//!   time after each step until a 500 ms window has goodput ≥ 90 % of the
//!   current capacity and admitted p99 ≤ 2× unloaded.
//!
//! `cargo bench --bench overload` runs 10 s per cell (the steps: 10 s per
//! stretch); `cargo bench --bench overload -- --quick` (or
//! `OVERLOAD_SECONDS=2`) 2 s (steps: 3 s, so a 2 s recovery fits). As one
//! prebuilt binary on another machine (no Go, no Redis needed): `cargo
//! bench --bench overload --no-run` prints its path; run it with
//! `--bench`. Without `--bench` (as `cargo test --benches` runs it) it
//! makes a short smoke run.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `OVERLOAD_SECONDS` | 10 (`--quick`: 2) | seconds per cell |
//! | `OVERLOAD_SCENARIOS` | all | `loads,two-tenants,six-tenants,steps` |
//! | `OVERLOAD_SERIES` | unset | `1`: print the steps' 100 ms time series |

#[path = "scale/table.rs"]
#[allow(dead_code)] // `median` is the scale bench's alone
mod table;

use std::time::Duration;

use support::overload::{
    Capacity, Contender, LoadPlan, LoadRun, OverloadServer, RecoveryGoal, Report, ServiceTime,
    SlotTime, run,
};
use table::{Table, spaced};
use tokio::runtime::Runtime;

const SLOTS: usize = 8;
const LOW_SLOTS: usize = 2;
const LOADS: [f64; 5] = [0.5, 1.0, 2.0, 5.0, 10.0];
const SEED: u64 = 46;
const SCENARIOS: [&str; 4] = ["loads", "two-tenants", "six-tenants", "steps"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not.
    let full = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let seconds = std::env::var("OVERLOAD_SECONDS")
        .ok()
        .map(|s| s.trim().parse::<f64>().expect("OVERLOAD_SECONDS: seconds"))
        .unwrap_or(match (full, quick) {
            (_, true) => 2.0,
            (true, false) => 10.0,
            (false, false) => 0.5,
        });
    let scenarios: Vec<String> = std::env::var("OVERLOAD_SCENARIOS").map_or_else(
        |_| SCENARIOS.map(str::to_owned).to_vec(),
        |list| list.split(',').map(|s| s.trim().to_owned()).collect(),
    );
    for scenario in &scenarios {
        assert!(
            SCENARIOS.contains(&scenario.as_str()),
            "OVERLOAD_SCENARIOS: unknown {scenario:?} ({SCENARIOS:?})"
        );
    }
    let bench = Bench::new(seconds, full || quick);
    let baseline = bench.baseline();
    for scenario in &scenarios {
        match scenario.as_str() {
            "loads" => bench.loads(&baseline),
            "two-tenants" => bench.two_tenants(&baseline),
            "six-tenants" => bench.six_tenants(&baseline),
            _ => bench.steps(&baseline),
        }
    }
}

/// The measured capacity and the unloaded latency.
struct Baseline {
    capacity: f64,
    unloaded_p99: Duration,
}

struct Bench {
    server: Runtime,
    client: Runtime,
    cell: Duration,
    step: Duration,
    series: bool,
}

impl Bench {
    fn new(seconds: f64, measured: bool) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let server_threads = (cpus / 2).max(1);
        let runtime = |threads: usize, name: &str| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name(name)
                .enable_all()
                .build()
                .expect("a runtime")
        };
        let cell = Duration::from_secs_f64(seconds);
        println!(
            "overload: {cpus} CPUs ({server_threads} server threads, {} load threads), {seconds} s per cell",
            (cpus - server_threads).max(1)
        );
        Self {
            server: runtime(server_threads, "overload-server"),
            client: runtime((cpus - server_threads).max(1), "overload-load"),
            cell,
            // Long enough that a 2 s recovery and a 500 ms window fit.
            step: if measured {
                cell.max(Duration::from_secs(3))
            } else {
                cell
            },
            series: std::env::var("OVERLOAD_SERIES").is_ok_and(|v| v == "1"),
        }
    }

    /// One cell: a fresh server behind `contender`, `plan` run against it.
    fn run(&self, contender: Contender, plan: &LoadPlan) -> (LoadRun, SlotTime) {
        let capacity = Capacity::new(SLOTS);
        let server = self.server.block_on(OverloadServer::start(
            contender,
            capacity.clone(),
            ServiceTime::ISSUE_46,
            SEED,
        ));
        let load = self.client.block_on(run(&server, plan));
        (load, capacity.slot_time())
    }

    fn baseline(&self) -> Baseline {
        let nominal = ServiceTime::ISSUE_46.nominal_capacity(SLOTS);
        let tuned = Contender::ConcurrencyLimitLoadShed { limit: SLOTS };
        let (saturated, _) = self.run(tuned, &LoadPlan::new(2.0 * nominal, self.cell));
        let capacity = saturated.report().overall.goodput;
        let (unloaded, _) = self.run(Contender::None, &LoadPlan::new(0.5 * capacity, self.cell));
        let unloaded = unloaded.report().overall;
        let baseline = Baseline {
            capacity,
            unloaded_p99: unloaded.admitted_p99.unwrap_or_default(),
        };
        println!(
            "\ncapacity: nominal {} calls/s ({SLOTS} slots × 1 / 10 ms), measured {} (goodput of {tuned} at 2× nominal); unloaded (none, 0.5×): p50 {} ms, p99 {} ms\n",
            spaced(nominal),
            spaced(capacity),
            ms(unloaded.admitted_p50),
            ms(unloaded.admitted_p99),
        );
        baseline
    }

    fn loads(&self, baseline: &Baseline) {
        println!(
            "### Loads (one tenant; capacity {} calls/s)\n",
            spaced(baseline.capacity)
        );
        let mut table = Table::new(header(&[
            "load",
            "contender",
            "goodput/s",
            "% cap.",
            "adm. p50",
            "adm. p99",
            "p99 ÷ unl.",
            "refused",
            "refusal p50/p99 (client)",
            "server p50/p99 (µs)",
            "refused with",
            "slot time cancelled",
            "client errors",
        ]));
        for load in LOADS {
            let plan = LoadPlan::new(load * baseline.capacity, self.cell);
            for contender in Contender::compared(SLOTS) {
                let (run, slot_time) = self.run(contender, &plan);
                let report = run.report();
                let all = &report.overall;
                table.row(vec![
                    format!("{load}×"),
                    contender.to_string(),
                    spaced(all.goodput),
                    percent(all.goodput / baseline.capacity),
                    ms(all.admitted_p50),
                    ms(all.admitted_p99),
                    ratio(all.admitted_p99, baseline.unloaded_p99),
                    percent(share(all.refused, all.calls)),
                    format!("{} / {}", ms(all.refusal_p50), ms(all.refusal_p99)),
                    format!(
                        "{} / {}",
                        us(report.server_refusal_p50),
                        us(report.server_refusal_p99)
                    ),
                    refusals(&report),
                    percent(slot_time.cancelled_share()),
                    client_errors(&report),
                ]);
            }
        }
        table.print();
    }

    fn two_tenants(&self, baseline: &Baseline) {
        let share = baseline.capacity / 2.0;
        let (quiet, noisy) = (0.5 * share, 12.0 * share);
        println!(
            "\n### Two tenants: noisy at 12× its share ({} calls/s), quiet at 0.5× ({} calls/s)\n",
            spaced(noisy),
            spaced(quiet)
        );
        let plan = LoadPlan::new(quiet + noisy, self.cell)
            .with_tenants([("quiet", quiet), ("noisy", noisy)]);
        let mut table = Table::new(header(&[
            "contender",
            "quiet success",
            "quiet refused / late",
            "quiet p99",
            "quiet p99 ÷ unl.",
            "noisy goodput/s",
            "goodput % cap.",
            "refused with",
        ]));
        for contender in Contender::compared(SLOTS) {
            let report = self.run(contender, &plan).0.report();
            let (quiet, noisy) = (&report.tenants[0].1, &report.tenants[1].1);
            table.row(vec![
                contender.to_string(),
                percent(quiet.success_rate()),
                format!(
                    "{} / {}",
                    quiet.refused,
                    quiet.deadline_exceeded + quiet.ok_late
                ),
                ms(quiet.admitted_p99),
                ratio(quiet.admitted_p99, baseline.unloaded_p99),
                spaced(noisy.goodput),
                percent(report.overall.goodput / baseline.capacity),
                refusals(&report),
            ]);
        }
        table.print();
    }

    fn six_tenants(&self, baseline: &Baseline) {
        println!("\n### Six tenants at 3× the capacity in all, equal shares\n");
        let tenants = (0..6).map(|i| (format!("tenant-{i}"), 1.0));
        let plan = LoadPlan::new(3.0 * baseline.capacity, self.cell).with_tenants(tenants);
        let mut table = Table::new(header(&[
            "contender",
            "goodput % cap.",
            "adm. p99",
            "p99 ÷ unl.",
            "Jain (goodput)",
            "lowest tenant success",
            "refused with",
        ]));
        for contender in Contender::compared(SLOTS) {
            let report = self.run(contender, &plan).0.report();
            let lowest = report
                .tenants
                .iter()
                .map(|(_, s)| s.success_rate())
                .fold(1.0, f64::min);
            table.row(vec![
                contender.to_string(),
                percent(report.overall.goodput / baseline.capacity),
                ms(report.overall.admitted_p99),
                ratio(report.overall.admitted_p99, baseline.unloaded_p99),
                format!("{:.3}", report.fairness),
                percent(lowest),
                refusals(&report),
            ]);
        }
        table.print();
    }

    fn steps(&self, baseline: &Baseline) {
        let stretch = self.step;
        println!(
            "\n### Capacity {SLOTS} → {LOW_SLOTS} → {SLOTS} slots under 1.5× ({} s each; recovered: the end of the first 500 ms window after the step with goodput ≥ 90 % of the current capacity and p99 ≤ 2× unloaded)\n",
            stretch.as_secs_f64()
        );
        let low = baseline.capacity * LOW_SLOTS as f64 / SLOTS as f64;
        let plan = LoadPlan::new(1.5 * baseline.capacity, stretch * 3)
            .with_capacity_steps([(stretch, LOW_SLOTS), (stretch * 2, SLOTS)]);
        let mut table = Table::new(header(&[
            "contender",
            "goodput % cap. (8 / 2 / 8)",
            "adm. p99 (8 / 2 / 8)",
            "recovered after 8→2",
            "after 2→8",
        ]));
        let stretches = [
            (Duration::ZERO, baseline.capacity),
            (stretch, low),
            (stretch * 2, baseline.capacity),
        ];
        for contender in Contender::compared(SLOTS) {
            let (run, _) = self.run(contender, &plan);
            let windows: Vec<_> = stretches
                .iter()
                .map(|(from, _)| run.window(*from, *from + stretch))
                .collect();
            let recovered = |(from, capacity): (Duration, f64)| {
                let goal = RecoveryGoal::issue_46(capacity, baseline.unloaded_p99);
                run.recovery(from, from + stretch, &goal).map_or_else(
                    || format!("not in {} s", stretch.as_secs_f64()),
                    |t| format!("{} ms", t.as_millis()),
                )
            };
            table.row(vec![
                contender.to_string(),
                windows
                    .iter()
                    .zip(&stretches)
                    .map(|(w, (_, capacity))| percent(w.goodput / capacity))
                    .collect::<Vec<_>>()
                    .join(" / "),
                windows
                    .iter()
                    .map(|w| ms(w.admitted_p99))
                    .collect::<Vec<_>>()
                    .join(" / "),
                recovered(stretches[1]),
                recovered(stretches[2]),
            ]);
            if self.series {
                print_series(contender, &run);
            }
        }
        table.print();
    }
}

/// The 100 ms time series of a run, one line per bucket.
fn print_series(contender: Contender, run: &LoadRun) {
    println!("series {contender}: t (s), goodput/s, admitted p99 (ms)");
    for window in run.series(Duration::from_millis(100)) {
        println!(
            "{:.1}\t{}\t{}",
            window.from.as_secs_f64(),
            spaced(window.goodput),
            ms(window.admitted_p99)
        );
    }
}

fn header(names: &[&str]) -> Vec<String> {
    names.iter().map(|&name| name.to_owned()).collect()
}

fn ms(time: Option<Duration>) -> String {
    time.map_or_else(
        || "-".to_owned(),
        |t| format!("{:.1}", t.as_secs_f64() * 1e3),
    )
}

fn us(time: Option<Duration>) -> String {
    time.map_or_else(|| "-".to_owned(), |t| t.as_micros().to_string())
}

fn percent(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn ratio(time: Option<Duration>, unloaded: Duration) -> String {
    match time {
        Some(time) if !unloaded.is_zero() => {
            format!("{:.2}", time.as_secs_f64() / unloaded.as_secs_f64())
        }
        _ => "-".to_owned(),
    }
}

/// The refusals' codes, and how many carried a pushback.
fn refusals(report: &Report) -> String {
    if report.refusal_codes.is_empty() {
        return "-".to_owned();
    }
    let codes: Vec<String> = report
        .refusal_codes
        .values()
        .map(|(code, count)| format!("{code:?} ×{count}"))
        .collect();
    format!(
        "{}; pushback ×{}",
        codes.join(", "),
        report.refusals_with_pushback
    )
}

/// The client's own errors (connections lost), by message.
fn client_errors(report: &Report) -> String {
    let other = report.overall.other;
    if other == 0 {
        return "0".to_owned();
    }
    let first = report
        .other_errors
        .iter()
        .next()
        .map(|((_, message), _)| message.as_str())
        .unwrap_or("");
    format!("{other} ({first})")
}
