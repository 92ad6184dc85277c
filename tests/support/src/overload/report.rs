//! What a [`LoadRun`] measured: per tenant and overall ([`Summary`],
//! [`Report`]), Jain's fairness index over the tenants' goodput
//! ([`jain`]), goodput and admitted p99 over time ([`Window`],
//! [`LoadRun::series`]), and the time to recover after a capacity step
//! ([`LoadRun::recovery`]).
//!
//! Goodput is calls answered OK within their deadline, per second of the
//! plan's duration. Admitted calls are those the server did not refuse:
//! OK (in time or late) and past their deadline; their latency is the
//! client's, capped by the deadline. Percentiles are nearest-rank.

use std::collections::BTreeMap;
use std::time::Duration;

use tonic::Code;

use super::load::{CallRecord, LoadRun, Outcome};

/// One tenant's calls, or all of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Calls issued.
    pub calls: usize,
    /// OK within the deadline.
    pub ok: usize,
    /// OK after the deadline.
    pub ok_late: usize,
    /// Refused by the server.
    pub refused: usize,
    /// Past the deadline.
    pub deadline_exceeded: usize,
    /// Any other end (the client's own errors).
    pub other: usize,
    /// OK within the deadline per second.
    pub goodput: f64,
    /// Median latency of admitted calls.
    pub admitted_p50: Option<Duration>,
    /// 99th percentile latency of admitted calls.
    pub admitted_p99: Option<Duration>,
    /// Median latency of refused calls, as the client saw it.
    pub refusal_p50: Option<Duration>,
    /// 99th percentile latency of refused calls, as the client saw it.
    pub refusal_p99: Option<Duration>,
}

impl Summary {
    /// Sums up `records` over a run of `seconds`.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a CallRecord>, seconds: f64) -> Self {
        let mut summary = Self::default();
        let mut admitted = Vec::new();
        let mut refused = Vec::new();
        for record in records {
            summary.calls += 1;
            match record.outcome {
                Outcome::Ok => summary.ok += 1,
                Outcome::OkLate => summary.ok_late += 1,
                Outcome::Refused { .. } => summary.refused += 1,
                Outcome::DeadlineExceeded => summary.deadline_exceeded += 1,
                Outcome::Other { .. } => summary.other += 1,
            }
            if record.outcome.is_admitted() {
                admitted.push(record.latency);
            } else if record.outcome.is_refused() {
                refused.push(record.latency);
            }
        }
        summary.goodput = per_second(summary.ok, seconds);
        [summary.admitted_p50, summary.admitted_p99] = percentiles(&mut admitted, [0.5, 0.99]);
        [summary.refusal_p50, summary.refusal_p99] = percentiles(&mut refused, [0.5, 0.99]);
        summary
    }

    /// The share of calls answered OK within their deadline (1 without
    /// calls).
    pub fn success_rate(&self) -> f64 {
        if self.calls == 0 {
            1.0
        } else {
            self.ok as f64 / self.calls as f64
        }
    }

    /// Whether every call has exactly one outcome counted.
    pub fn adds_up(&self) -> bool {
        self.ok + self.ok_late + self.refused + self.deadline_exceeded + self.other == self.calls
    }
}

/// A run summed up, overall and per tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Every call.
    pub overall: Summary,
    /// Each tenant's calls, in the plan's order.
    pub tenants: Vec<(String, Summary)>,
    /// Jain's fairness index over the tenants' goodput.
    pub fairness: f64,
    /// Median server-side time of a refusal (request to response headers).
    pub server_refusal_p50: Option<Duration>,
    /// 99th percentile server-side time of a refusal.
    pub server_refusal_p99: Option<Duration>,
    /// Refusals by status code.
    pub refusal_codes: BTreeMap<i32, (Code, usize)>,
    /// Refusals that carried `grpc-retry-pushback-ms`.
    pub refusals_with_pushback: usize,
    /// The client's own errors, by code and message.
    pub other_errors: BTreeMap<(i32, String), usize>,
}

impl LoadRun {
    /// The run summed up.
    pub fn report(&self) -> Report {
        let seconds = self.plan.duration.as_secs_f64();
        let tenants: Vec<(String, Summary)> = (0..self.plan.tenants.len())
            .map(|tenant| {
                let records = self.records.iter().filter(|r| r.tenant == tenant);
                (
                    self.plan.tenants[tenant].0.clone(),
                    Summary::of(records, seconds),
                )
            })
            .collect();
        let goodputs: Vec<f64> = tenants.iter().map(|(_, s)| s.goodput).collect();
        let mut server = self.server_refusals.clone();
        let [server_refusal_p50, server_refusal_p99] = percentiles(&mut server, [0.5, 0.99]);
        let mut report = Report {
            overall: Summary::of(&self.records, seconds),
            fairness: jain(&goodputs),
            tenants,
            server_refusal_p50,
            server_refusal_p99,
            refusal_codes: BTreeMap::new(),
            refusals_with_pushback: 0,
            other_errors: BTreeMap::new(),
        };
        for record in &self.records {
            match &record.outcome {
                Outcome::Refused { code, pushback_ms } => {
                    report
                        .refusal_codes
                        .entry(*code as i32)
                        .or_insert((*code, 0))
                        .1 += 1;
                    report.refusals_with_pushback += usize::from(pushback_ms.is_some());
                }
                Outcome::Other { code, message } => {
                    *report
                        .other_errors
                        .entry((*code as i32, message.clone()))
                        .or_default() += 1;
                }
                _ => {}
            }
        }
        report
    }

    /// Goodput and admitted p99 of the calls that ended in `[from, to)`.
    pub fn window(&self, from: Duration, to: Duration) -> Window {
        let ended = self
            .records
            .iter()
            .filter(|record| (from..to).contains(&record.end()));
        let mut good = 0;
        let mut admitted = Vec::new();
        for record in ended {
            good += usize::from(record.outcome.is_good());
            if record.outcome.is_admitted() {
                admitted.push(record.latency);
            }
        }
        let [admitted_p99] = percentiles(&mut admitted, [0.99]);
        Window {
            from,
            goodput: per_second(good, (to - from).as_secs_f64()),
            admitted_p99,
        }
    }

    /// Consecutive windows of `bucket` from the start to the end of the
    /// plan's duration (the capacity-step scenario's time series, 100 ms
    /// buckets in issue #46).
    pub fn series(&self, bucket: Duration) -> Vec<Window> {
        let mut windows = Vec::new();
        let mut from = Duration::ZERO;
        while from < self.plan.duration && !bucket.is_zero() {
            windows.push(self.window(from, from + bucket));
            from += bucket;
        }
        windows
    }

    /// The time from `step` to the end of the first window of
    /// `goal.window`, starting at `step` or a multiple of
    /// `goal.every` after it and ending by `until`, whose goodput is at
    /// least `goal.goodput` and whose admitted p99 is at most `goal.p99`;
    /// `None` if no such window.
    pub fn recovery(
        &self,
        step: Duration,
        until: Duration,
        goal: &RecoveryGoal,
    ) -> Option<Duration> {
        let mut from = step;
        while from + goal.window <= until && !goal.every.is_zero() {
            let window = self.window(from, from + goal.window);
            if window.goodput >= goal.goodput
                && window.admitted_p99.is_some_and(|p99| p99 <= goal.p99)
            {
                return Some(from + goal.window - step);
            }
            from += goal.every;
        }
        None
    }
}

/// Goodput and admitted p99 over a stretch of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Its start, from the start of the run.
    pub from: Duration,
    /// OK within the deadline per second, by the calls' end.
    pub goodput: f64,
    /// The admitted calls' 99th percentile latency, by the calls' end.
    pub admitted_p99: Option<Duration>,
}

/// What [`LoadRun::recovery`] waits for: issue #46 asks for 90 % of the
/// current capacity and twice the unloaded p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecoveryGoal {
    /// Goodput at least this (calls/s).
    pub goodput: f64,
    /// Admitted p99 at most this.
    pub p99: Duration,
    /// The window both are measured over (long enough that a 90 % goal
    /// is not missed by chance: 500 ms is about 95 calls on 2 slots).
    pub window: Duration,
    /// How far apart the windows tried start (100 ms: the series' buckets).
    pub every: Duration,
}

impl RecoveryGoal {
    /// 90 % of `capacity` calls/s and `2 × unloaded_p99`, over 500 ms
    /// windows tried every 100 ms.
    pub fn issue_46(capacity: f64, unloaded_p99: Duration) -> Self {
        Self {
            goodput: 0.9 * capacity,
            p99: unloaded_p99 * 2,
            window: Duration::from_millis(500),
            every: Duration::from_millis(100),
        }
    }
}

/// Jain's fairness index, `(Σx)² / (n Σx²)`: 1 when all are equal, `1/n`
/// when one has everything; 1 for no values or all zero.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (values.len() as f64 * squares)
    }
}

/// Nearest-rank percentiles (`0.99` is p99) of `values`, sorted in place;
/// `None` for none.
pub fn percentiles<const N: usize>(
    values: &mut [Duration],
    quantiles: [f64; N],
) -> [Option<Duration>; N] {
    values.sort_unstable();
    quantiles.map(|q| {
        let rank = (q * values.len() as f64).ceil() as usize;
        values.get(rank.clamp(1, values.len().max(1)) - 1).copied()
    })
}

fn per_second(count: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}
