//! The overload harness of issue #46: a server of known capacity behind a
//! chosen admission contender, open-loop load with deadlines, and what it
//! measured, for the `overload` bench, examples and real-server tests.
//!
//! - [`capacity`]: [`Capacity`] (N worker slots, resized while it runs:
//!   8 → 2 → 8), [`ServiceTime`] (5 ms + Exp(5 ms), seeded), and
//!   [`SlotEcho`], the echo whose unary handler holds a slot for one
//!   service time. A cancelled call frees its slot when its handler future
//!   is dropped.
//! - [`server`]: [`OverloadServer`], the echo on 127.0.0.1 behind a
//!   [`Contender`] (none, tower's `ConcurrencyLimit` + `LoadShed`,
//!   `TenantLimitLayer`'s in-flight limit), with [`RefusalTimingLayer`]
//!   outermost timing each refusal at the server.
//! - [`load`]: [`LoadPlan`] and [`run`]: Poisson arrivals, 100 ms
//!   deadlines, tenants by weight, several HTTP/2 connections, capacity
//!   steps; one [`CallRecord`] per call.
//! - [`report`]: [`Summary`] and [`Report`] (goodput, admitted and refusal
//!   latency, success rate, Jain's index), [`Window`]s over time and
//!   [`LoadRun::recovery`] after a step.
//!
//! ```no_run
//! # async fn example() {
//! use std::time::Duration;
//! use tonic_hotpath_test_support::overload::{Capacity, Contender, LoadPlan, OverloadServer, ServiceTime, run};
//!
//! let server =
//!     OverloadServer::start(Contender::None, Capacity::new(8), ServiceTime::ISSUE_46, 1).await;
//! let load = run(&server, &LoadPlan::new(400.0, Duration::from_secs(1))).await;
//! let report = load.report();
//! println!("goodput {:.0}/s, p99 {:?}", report.overall.goodput, report.overall.admitted_p99);
//! # }
//! ```

pub mod capacity;
pub mod load;
pub mod report;
pub mod server;
pub mod timing;

pub use capacity::{Capacity, ServiceTime, SlotEcho, SlotGuard, SlotTime};
pub use load::{CallRecord, LoadPlan, LoadRun, Outcome, run};
pub use report::{RecoveryGoal, Report, Summary, Window, jain, percentiles};
pub use server::{Contender, OverloadServer};
pub use timing::{RefusalTimes, RefusalTiming, RefusalTimingLayer};
