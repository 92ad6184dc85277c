//! [`OverloadServer`]: the [`SlotEcho`] served on 127.0.0.1 behind a
//! [`Contender`], with the [`RefusalTimingLayer`] outermost.
//!
//! Each contender is one variant of [`Contender`] and one arm of
//! [`OverloadServer::start`]'s `match`, both here; [`Contender::compared`]
//! lists the ones the bench puts side by side.

use std::fmt;
use std::net::SocketAddr;

use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic_hotpath::limits::{AdaptiveLimitLayer, Limits, TenantLimitLayer};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::limit::ConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;

use super::capacity::{Capacity, ServiceTime, SlotEcho};
use super::timing::{RefusalTimes, RefusalTimingLayer};
use crate::stacks::{ServerLayer, ServerTask, spawn_echo};

/// What stands between the callers and the slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// Nothing: tonic and hyper accept every stream, which waits for a
    /// slot.
    None,
    /// tower's `ConcurrencyLimitLayer::new(limit)` inside
    /// `LoadShedLayer`, server-wide (one semaphore: tonic layers its
    /// stack once). A call past the limit gets tower's `Overloaded`
    /// error, which tonic answers as `RESOURCE_EXHAUSTED` "Too many active
    /// requests for the connection" (its `Status::from_error`), without
    /// pushback.
    ConcurrencyLimitLoadShed {
        /// Calls in flight at once, server-wide.
        limit: usize,
    },
    /// `TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(n))`:
    /// each tenant (`x-scope-orgid`) at most `per_tenant` calls in flight,
    /// refused with `RESOURCE_EXHAUSTED` naming the tenant.
    TenantInFlight {
        /// Calls in flight at once per tenant.
        per_tenant: u32,
    },
    /// `AdaptiveLimitLayer::new()`: a limit learned from latency (not told
    /// the capacity), shared fairly by tenant, refused with `UNAVAILABLE`
    /// and a pushback.
    Adaptive,
}

impl Contender {
    /// The contenders compared side by side on a server of `slots` slots,
    /// the static limits tuned to it: no protection, `ConcurrencyLimit` +
    /// `LoadShed` at `slots`, `TenantLimitLayer` at `slots` per tenant
    /// (overcommitted as soon as several tenants call).
    pub fn compared(slots: usize) -> Vec<Self> {
        vec![
            Self::None,
            Self::ConcurrencyLimitLoadShed { limit: slots },
            Self::TenantInFlight {
                per_tenant: u32::try_from(slots).unwrap_or(u32::MAX),
            },
            Self::Adaptive,
        ]
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::ConcurrencyLimitLoadShed { limit } => {
                write!(f, "ConcurrencyLimit+LoadShed {limit}")
            }
            Self::TenantInFlight { per_tenant } => {
                write!(f, "TenantLimitLayer {per_tenant}/tenant")
            }
            Self::Adaptive => f.write_str("AdaptiveLimitLayer"),
        }
    }
}

/// A [`SlotEcho`] served behind a [`Contender`] on 127.0.0.1; stopped on
/// drop (its connections end with their clients).
#[derive(Debug)]
pub struct OverloadServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its slots (resize them with [`Capacity::set_slots`]).
    pub capacity: Capacity,
    /// The server-side time of each refusal.
    pub refusals: RefusalTimes,
    /// What it is served behind.
    pub contender: Contender,
    task: ServerTask,
}

impl OverloadServer {
    /// Serves a [`SlotEcho`] on `capacity`, its service times drawn from
    /// `service_time` seeded with `seed`, behind `contender`, on the
    /// current runtime.
    pub async fn start(
        contender: Contender,
        capacity: Capacity,
        service_time: ServiceTime,
        seed: u64,
    ) -> Self {
        let echo = SlotEcho::new(capacity.clone(), service_time, seed);
        let refusals = RefusalTimes::default();
        let timing = RefusalTimingLayer::new(refusals.clone());
        let (addr, incoming) = crate::bind().await;
        let served = Served {
            timing,
            echo,
            incoming,
        };
        let task = match contender {
            Contender::None => served.behind(Identity::new()),
            Contender::ConcurrencyLimitLoadShed { limit } => served.behind(
                ServiceBuilder::new()
                    .layer(LoadShedLayer::new())
                    .layer(ConcurrencyLimitLayer::new(limit))
                    .into_inner(),
            ),
            Contender::TenantInFlight { per_tenant } => served.behind(TenantLimitLayer::new(
                Limits::unlimited().with_max_in_flight(per_tenant),
            )),
            Contender::Adaptive => served.behind(AdaptiveLimitLayer::new()),
        };
        Self {
            addr,
            capacity,
            refusals,
            contender,
            task,
        }
    }
}

impl Drop for OverloadServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What every contender's server shares: the timing layer outside it,
/// the echo inside, the listener.
struct Served {
    timing: RefusalTimingLayer,
    echo: SlotEcho,
    incoming: TcpIncoming,
}

impl Served {
    /// Serves the echo behind `contender`, behind the timing layer.
    fn behind<L>(self, contender: L) -> ServerTask
    where
        Stack<L, Stack<RefusalTimingLayer, Identity>>: ServerLayer<Routes>,
    {
        let layer = ServiceBuilder::new()
            .layer(self.timing)
            .layer(contender)
            .into_inner();
        spawn_echo(layer, self.echo, self.incoming)
    }
}
