//! A tonic server at 5× its capacity stays useful, and a quiet tenant
//! beside a noisy one is unharmed: `AdaptiveLimitLayer` against no
//! protection, on the same server.
//!
//! The server's capacity is simulated (the handler holds one of 8 worker
//! slots for 5 ms + Exp(5 ms): about 700–800 calls/s), so that the
//! machine's own CPU is not what overloads. Callers send open-loop load
//! with 100 ms deadlines: a noisy tenant at 4.75× the capacity and a quiet
//! one at a quarter of it (half its fair share), for 4 s per contender.
//! The server stack is the one a user writes:
//!
//! ```ignore
//! Server::builder()
//!     .layer(AdaptiveLimitLayer::new()) // not told the capacity
//!     .add_service(EchoServer::new(echo))
//! ```
//!
//! `cargo run --release --example adaptive`

use std::time::Duration;

use support::overload::{Capacity, Contender, LoadPlan, OverloadServer, ServiceTime, run};

const SLOTS: usize = 8;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let capacity = ServiceTime::ISSUE_46.nominal_capacity(SLOTS);
    let (noisy, quiet) = (4.75 * capacity, 0.25 * capacity);
    println!(
        "a server of {SLOTS} slots (about {capacity:.0} calls/s); a noisy tenant at {noisy:.0} calls/s, a quiet one at {quiet:.0}\n"
    );
    println!("| server | goodput (calls/s OK in time) | quiet tenant's success | quiet p99 |");
    println!("|---|---|---|---|");
    for contender in [Contender::None, Contender::Adaptive] {
        let server =
            OverloadServer::start(contender, Capacity::new(SLOTS), ServiceTime::ISSUE_46, 7).await;
        let plan = LoadPlan::new(noisy + quiet, Duration::from_secs(4))
            .with_tenants([("noisy", noisy), ("quiet", quiet)]);
        let report = run(&server, &plan).await.report();
        let quiet = &report.tenants[1].1;
        println!(
            "| {contender} | {:.0} | {:.1} % | {} |",
            report.overall.goodput,
            100.0 * quiet.success_rate(),
            quiet.admitted_p99.map_or("-".to_owned(), |p99| format!(
                "{:.1} ms",
                p99.as_secs_f64() * 1e3
            )),
        );
    }
}
