//! Open-loop load ([`LoadPlan`], [`run`]): Poisson arrivals at a given
//! rate, whatever the server answers, each call with a deadline, tenants
//! drawn by weight, spread over several HTTP/2 connections, and the
//! server's slots changed at given times. Every call issued gets exactly
//! one [`CallRecord`].
//!
//! **Connections.** h2 sends GOAWAY (`ENHANCE_YOUR_CALM`) on a connection
//! once it has reset 1 024 streams itself, and a client resets a stream
//! for each call its deadline cancels: at 8× capacity without protection,
//! one connection dies within a second or two, and tonic reports its calls
//! as `RESOURCE_EXHAUSTED` "h2 protocol error" (issue #46). So each
//! connection carries at most [`LoadPlan::calls_per_connection`] calls
//! (512 by default, under the limit however many are cancelled), then is
//! replaced by a fresh one (its calls in flight end on the old one).
//!
//! **Cost.** One dispatcher task sleeps until the next arrival (tokio's
//! 1 ms timer: arrivals due together are sent together) and spawns each
//! call; each call task sends one unary call and one record.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::server::OverloadServer;
use crate::EchoClient;
use crate::limits::{pushback, request};

/// One run of open-loop load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Calls per second (Poisson arrivals), all tenants together.
    pub rate: f64,
    /// How long calls are started for.
    pub duration: Duration,
    /// Each call's deadline (`grpc-timeout`, and the client gives up then).
    pub deadline: Duration,
    /// The tenants (`x-scope-orgid`) and their weights: a call is
    /// `tenants[i]`'s with probability `weight_i / Σ weights`.
    pub tenants: Vec<(String, f64)>,
    /// HTTP/2 connections used at once (calls go round-robin).
    pub connections: usize,
    /// Calls a connection carries before it is replaced.
    pub calls_per_connection: usize,
    /// `(at, slots)`: the server's slots set to `slots` at `at` into the
    /// run.
    pub capacity_steps: Vec<(Duration, usize)>,
    /// Seeds the arrivals and the tenants drawn.
    pub seed: u64,
}

impl LoadPlan {
    /// `rate` calls per second for `duration`, one tenant (`tenant-0`),
    /// 100 ms deadlines, 8 connections of at most 512 calls each, no
    /// capacity steps, seed 46.
    pub fn new(rate: f64, duration: Duration) -> Self {
        Self {
            rate,
            duration,
            deadline: Duration::from_millis(100),
            tenants: vec![("tenant-0".to_owned(), 1.0)],
            connections: 8,
            calls_per_connection: 512,
            capacity_steps: Vec::new(),
            seed: 46,
        }
    }

    /// These tenants and weights instead.
    #[must_use]
    pub fn with_tenants<S: Into<String>>(
        mut self,
        tenants: impl IntoIterator<Item = (S, f64)>,
    ) -> Self {
        self.tenants = tenants
            .into_iter()
            .map(|(name, w)| (name.into(), w))
            .collect();
        self
    }

    /// With these capacity steps (`(at, slots)`).
    #[must_use]
    pub fn with_capacity_steps(
        mut self,
        steps: impl IntoIterator<Item = (Duration, usize)>,
    ) -> Self {
        self.capacity_steps = steps.into_iter().collect();
        self
    }
}

/// How a call ended, as its caller saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// OK within its deadline.
    Ok,
    /// OK, but after its deadline (the response and the client's timer
    /// were ready together).
    OkLate,
    /// Refused by the server: a status the server sent (a response, so
    /// its metadata is not empty) that is not a deadline's.
    Refused {
        /// The status code.
        code: Code,
        /// Its `grpc-retry-pushback-ms`, if any.
        pushback_ms: Option<u64>,
    },
    /// The deadline passed: the harness's timer, tonic's client or server
    /// timer (`CANCELLED` "Timeout expired"), or a `DEADLINE_EXCEEDED`.
    DeadlineExceeded,
    /// Anything else: a status the client made itself (a connection
    /// error, h2's GOAWAY), with its code and message.
    Other {
        /// The status code.
        code: Code,
        /// The status message.
        message: String,
    },
}

impl Outcome {
    /// OK within its deadline: goodput.
    pub fn is_good(&self) -> bool {
        *self == Self::Ok
    }

    /// Not refused by the server: OK (in time or late) or past its
    /// deadline.
    pub fn is_admitted(&self) -> bool {
        matches!(self, Self::Ok | Self::OkLate | Self::DeadlineExceeded)
    }

    /// Refused by the server.
    pub fn is_refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }

    fn of(result: Result<(), Status>, latency: Duration, deadline: Duration) -> Self {
        match result {
            Ok(()) if latency <= deadline => Self::Ok,
            Ok(()) => Self::OkLate,
            Err(status) if status.code() == Code::DeadlineExceeded || tonics_timer(&status) => {
                Self::DeadlineExceeded
            }
            Err(status) if !status.metadata().is_empty() => Self::Refused {
                code: status.code(),
                pushback_ms: pushback(&status),
            },
            Err(status) => Self::Other {
                code: status.code(),
                message: status.message().to_owned(),
            },
        }
    }
}

/// Whether `status` is one of tonic's own deadline timers: its channel
/// times a call by its `grpc-timeout` too, and so does its server (outside
/// every layer); each reports the expiry as `CANCELLED` "Timeout expired"
/// (`Status::from_error` of its `TimeoutExpired`), the server's as a
/// trailers-only response.
fn tonics_timer(status: &Status) -> bool {
    status.code() == Code::Cancelled && status.message() == "Timeout expired"
}

/// One call: whose, when, how long, how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Its tenant, an index into [`LoadPlan::tenants`].
    pub tenant: usize,
    /// When it was sent, from the start of the run.
    pub start: Duration,
    /// From sending it to its outcome.
    pub latency: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

impl CallRecord {
    /// When it ended, from the start of the run.
    pub fn end(&self) -> Duration {
        self.start + self.latency
    }
}

/// What a run did: the plan, each call's record, and the server's side.
#[derive(Debug, Clone)]
pub struct LoadRun {
    /// The plan run.
    pub plan: LoadPlan,
    /// Calls issued (each has exactly one record).
    pub issued: usize,
    /// One record per call, in the order they ended.
    pub records: Vec<CallRecord>,
    /// The server-side time of each refusal during the run.
    pub server_refusals: Vec<Duration>,
    /// Connections opened.
    pub connections_opened: usize,
}

/// Runs `plan` against `server` (on the current runtime) and waits for
/// every call to end.
pub async fn run(server: &OverloadServer, plan: &LoadPlan) -> LoadRun {
    drop(server.refusals.take());
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let mut connections = Connections::open(server.addr, plan).await;
    let weights: f64 = plan.tenants.iter().map(|(_, weight)| weight).sum();
    let (records, mut ended) = mpsc::unbounded_channel();
    let started = Instant::now();
    let steps = tokio::spawn(step_capacity(
        server.capacity.clone(),
        plan.capacity_steps.clone(),
        started,
    ));
    let mut next = Duration::ZERO;
    let mut issued = 0;
    while next < plan.duration {
        if started + next > Instant::now() {
            tokio::time::sleep_until((started + next).into()).await;
        }
        let tenant = pick(&plan.tenants, rng.random::<f64>() * weights);
        let mut client = EchoClient::new(connections.next());
        let org_id = plan.tenants[tenant].0.clone();
        let (records, deadline) = (records.clone(), plan.deadline);
        tokio::spawn(async move {
            let mut call = request(Some(&org_id), "overload");
            call.set_timeout(deadline);
            let sent = Instant::now();
            let result = match tokio::time::timeout(deadline, client.unary_echo(call)).await {
                Ok(result) => result.map(drop),
                Err(_) => Err(Status::deadline_exceeded("the client's deadline")),
            };
            let latency = sent.elapsed();
            let _ = records.send(CallRecord {
                tenant,
                start: sent - started,
                latency,
                outcome: Outcome::of(result, latency, deadline),
            });
        });
        issued += 1;
        // Exp(1 / rate) between arrivals; 1 - U is in (0, 1].
        next += Duration::from_secs_f64(-(1.0 - rng.random::<f64>()).ln() / plan.rate);
    }
    drop(records);
    let mut all = Vec::with_capacity(issued);
    while let Some(record) = ended.recv().await {
        all.push(record);
    }
    steps.abort();
    LoadRun {
        plan: plan.clone(),
        issued,
        records: all,
        server_refusals: server.refusals.take(),
        connections_opened: connections.opened,
    }
}

/// The tenant whose weight range holds `point` (in `0..Σ weights`).
fn pick(tenants: &[(String, f64)], mut point: f64) -> usize {
    for (i, (_, weight)) in tenants.iter().enumerate() {
        if point < *weight {
            return i;
        }
        point -= weight;
    }
    tenants.len().saturating_sub(1)
}

async fn step_capacity(capacity: super::Capacity, steps: Vec<(Duration, usize)>, started: Instant) {
    for (at, slots) in steps {
        tokio::time::sleep_until((started + at).into()).await;
        capacity.set_slots(slots);
    }
}

/// The connections calls go over, round-robin, each replaced after
/// `calls_per_connection` calls.
struct Connections {
    endpoint: Endpoint,
    channels: Vec<(Channel, usize)>,
    turn: usize,
    most: usize,
    opened: usize,
}

impl Connections {
    async fn open(addr: SocketAddr, plan: &LoadPlan) -> Self {
        let endpoint = crate::endpoint(addr);
        let mut channels = Vec::with_capacity(plan.connections.max(1));
        for _ in 0..plan.connections.max(1) {
            channels.push((
                endpoint
                    .connect()
                    .await
                    .expect("connect to the overload server"),
                0,
            ));
        }
        Self {
            opened: channels.len(),
            endpoint,
            channels,
            turn: 0,
            most: plan.calls_per_connection.max(1),
        }
    }

    fn next(&mut self) -> Channel {
        self.turn = (self.turn + 1) % self.channels.len();
        let (channel, calls) = &mut self.channels[self.turn];
        if *calls == self.most {
            *channel = self.endpoint.connect_lazy();
            *calls = 0;
            self.opened += 1;
        }
        *calls += 1;
        channel.clone()
    }
}
