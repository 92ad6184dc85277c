//! Adaptive admission: [`AdaptiveLimitLayer`], a server-wide concurrency
//! limit learned from the latency of admitted calls, shared fairly among
//! tenants, that refuses at once what the server cannot serve in time.
//!
//! The rates of [`TenantLimitLayer`](super::TenantLimitLayer) protect
//! tenants from each other as well as the operator guessed the capacity;
//! capacity moves (a dependency slows, a deploy halves the replicas, a
//! neighbour takes the CPU), and a tonic server accepts every stream and
//! queues it until deadlines expire after the work was done. This layer
//! is never told the capacity: it learns how many calls the server can
//! hold in flight before they queue, and refuses the rest at once, with
//! `UNAVAILABLE` and a pushback, so that a client retries elsewhere.
//!
//! # The controller: a gradient, with a probed baseline
//!
//! A gradient controller (the family of Envoy's adaptive concurrency
//! filter and Netflix's Gradient2), rather than Vegas: both compare the
//! latency now with the latency of an unqueued call, but Vegas moves the
//! limit by a step of `log₁₀(limit)` a window, where a gradient moves it
//! in proportion to the queue (halving it at most per window), which is
//! what following a capacity quartered within two seconds takes. See
//! [`Gradient`] for the rule, the baseline and the probe, and the
//! parameters:
//!
//! | parameter | default | why |
//! |---|---|---|
//! | window | 100 ms, ≥ 10 samples | a mean of ≥ 10 samples; ten updates a second |
//! | tolerance | 5 % | a window's mean is noisy; more lets a queue build |
//! | headroom | 0.5 × √limit | the queue beyond the workers: workers stay busy between a call's end and the next arrival, and latency stays near the baseline |
//! | baseline horizon | 10 s | the least window mean over it: long enough to span probes |
//! | probe | half the limit for one window, after 5 s at the limit | re-measures the baseline under a steady overload |
//! | limits | 2 to 1 000, initially 16 | |
//!
//! Latency samples are unary calls that end normally: from arrival to the
//! response body's end, with at most one gRPC message in the response. A
//! streaming call (a second message) holds its place for its whole life,
//! but its latency is not a sample; nor is a call that fails, is cancelled
//! or is reset. A client-streaming method answers one message after the
//! client's whole stream, so its calls look unary: list such methods in
//! [`never_shed_methods`](AdaptiveLimitLayer::never_shed_methods) or put
//! them behind their own layer.
//!
//! # Fair by tenant
//!
//! Below the limit every call is admitted. At the limit, a call is
//! admitted only if its tenant holds less than its fair share: the limit
//! split among the tenants with calls in flight, by weight
//! ([`tenant_weight`](AdaptiveLimitLayer::tenant_weight)). So the tenant
//! holding the most beyond its share is refused first, and a tenant
//! within its share is never refused because another is over its own.
//! Tenants come from `x-scope-orgid` (or
//! [`RequireOrgIdLayer`](crate::tenant::RequireOrgIdLayer)'s validated
//! ids, by the same rules as the rate limits); calls without one count as
//! one tenant; a federated `a|b` call counts against each tenant named. At
//! most [`max_tenants`](AdaptiveLimitLayer::max_tenants) (10 000) are
//! tracked; new tenants beyond share one place.
//!
//! Priority classes: the gRPC health service (and any
//! [never-shed](AdaptiveLimitLayer::never_shed_methods) method) is never
//! refused; [shed-first](AdaptiveLimitLayer::shed_first_methods) (batch)
//! methods are refused once the calls in flight reach 80 % of the limit.
//!
//! # Deadlines
//!
//! A call whose `grpc-timeout` is shorter than the last window's mean
//! latency is refused at once: it would most likely expire after the
//! server did its work.
//!
//! # Said out loud
//!
//! Every refusal carries `grpc-retry-pushback-ms` (the current mean
//! latency, at least 1 ms): grpc-go's retry policy with `UNAVAILABLE`
//! retries it on another replica. [`AdaptiveHandle`] reads the limit,
//! calls in flight, latency and baseline;
//! [`observer`](AdaptiveLimitLayer::observer) counts refusals (`LimitMetrics`,
//! feature `otel`, by tenant and reason); `report_utilization` (feature
//! `orca`) publishes calls in flight ÷ limit as ORCA's application
//! utilization, so weighted round robin steers away before this replica
//! sheds.
//!
//! # Cost
//!
//! An admitted call takes no lock: it reads the limit, adds to the
//! server's calls in flight and its tenant's (one map lookup, lock-free),
//! and when it ends subtracts them and adds its latency to its thread's
//! stripe of the window. Once per window, the call that finds the window
//! over runs the controller.

mod admission;
mod body;
mod controller;
mod future;
mod layer;
#[cfg(feature = "otel")]
mod otel;
mod shares;
mod status;
mod stripes;

pub use body::ResponseBody;
pub use controller::Gradient;
pub use future::ResponseFuture;
pub use layer::{AdaptiveLimit, AdaptiveLimitLayer};
pub use status::{AdaptiveHandle, AdaptiveStatus};
