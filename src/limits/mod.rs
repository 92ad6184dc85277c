//! Per-tenant admission control: [`TenantLimitLayer`], a tower layer that
//! gives each tenant an in-flight limit, a rate limit and a work-unit rate,
//! with defaults, per-tenant overrides changed at run time, and Cortex's
//! global strategy.
//!
//! Cortex and Mimir enforce per-tenant limits in their distributors
//! (dskit's `limiter.RateLimiter`, `validation.Overrides`, the runtime
//! config file) and count each refusal per tenant. Here:
//!
//! - **Limits** ([`Limits`]): `max_in_flight` calls at once and a
//!   [`Rate`] (calls per second with a burst; GCRA, one timestamp per
//!   tenant), each optional. [`TenantLimitLayer::new`] takes the defaults;
//!   overrides give tenants their own. The GCRA is the crate's own (the
//!   state machine governor uses, on one `AtomicU64`), not governor's
//!   keyed limiter: that one gives every key the same quota, fixed at
//!   construction, and evicts by its own rule, where tenants here each
//!   have their own rate, changed at run time without losing the calls
//!   already counted, and are evicted only when that loses nothing.
//! - **Refusals**: `RESOURCE_EXHAUSTED`, trailers-only, the inner service
//!   not called, with a stable message naming the tenant and the limit
//!   ([`LimitError`]); `429 Too Many Requests` for plain HTTP.
//! - **When to retry**: a rate refusal carries the time until the tenant's
//!   bucket admits the call, read off its GCRA state at the refusal: the
//!   `grpc-retry-pushback-ms` trailer ([`LimitError::RETRY_PUSHBACK_MS`], gRFC A6:
//!   whole milliseconds, rounded up, never negative), which a grpc-go
//!   client with a retry policy waits instead of its backoff, and
//!   `Retry-After` for plain HTTP (whole seconds, rounded up, at least 1).
//!   Under the global strategy it is this replica's figure; for a federated
//!   call, the refused tenant's. In-flight refusals carry none unless
//!   [`in_flight_pushback`](TenantLimitLayer::in_flight_pushback) sets one.
//! - **Work units** ([`Limits::with_work_rate`]): a second rate, on the
//!   units a call carries (Cortex's samples) rather than on calls. The
//!   layer puts a [`TenantBudget`] into an admitted call's extensions; the
//!   service charges it once it has decoded the call
//!   ([`TenantBudgetExt::charge_work`]) with `golang.org/x/time/rate`'s
//!   `AllowN` rules, and turns a refusal into the same status, pushback
//!   included.
//! - **At run time** ([`LimitsHandle`]): defaults and overrides swapped
//!   atomically; with feature `limits-file`, a Cortex-style overrides file
//!   re-read on an interval (`LimitsHandle::watch_file`), a bad version
//!   logged once through `tracing` and the last good overrides kept.
//! - **Global strategy**: [`LimitsHandle::set_replicas`] divides each
//!   rate among the replicas the application reports, as Cortex's
//!   `global` ingestion-rate strategy does (no shared store).
//! - **Across a fleet** (feature `limits-redis`):
//!   `TenantLimitLayer::shared` keeps each tenant's rates in Redis as one
//!   fleet-wide bucket, spent locally from leases, with the global
//!   strategy as its fallback (below).
//! - **Metrics**: every refusal goes to a [`LimitObserver`];
//!   `LimitMetrics` (feature `otel`) counts them by tenant and reason, and
//!   `FileWatch::with_metrics` (features `otel` and `limits-file`) exports
//!   a watched file's reload status (last reload successful, its time,
//!   reloads and failures), as Cortex's runtime config manager does.
//! - **Adaptive admission** ([`AdaptiveLimitLayer`], module [`adaptive`]):
//!   a server-wide concurrency limit learned from the latency of admitted
//!   calls (never told the capacity), shared fairly among tenants; past
//!   it a call is refused at once with `UNAVAILABLE` and a pushback.
//!
//! # Rates, adaptive admission, or both
//!
//! Rates ([`TenantLimitLayer`]) enforce what each tenant *may* use: a
//! quota, known in advance, the same whatever the server's load
//! (`RESOURCE_EXHAUSTED`: this tenant, anywhere). Adaptive admission
//! ([`AdaptiveLimitLayer`]) protects what the server *can* do now: it
//! follows the capacity as it moves and sheds the excess fairly
//! (`UNAVAILABLE`: this server, now; retry elsewhere). Use rates for
//! contracts and abuse, adaptive admission against overload, and both on
//! a multi-tenant service: rates first (outside), so that a tenant over
//! its quota is refused before it takes a place in the limit.
//!
//! # On the client: adaptive throttling
//!
//! [`AdaptiveThrottleLayer`] is the client's side of overload (the Google
//! SRE book's client-side throttling, as grpc-go's RLS balancer has it):
//! over a lookback (30 s) it counts the calls the application made and
//! those the backend accepted (any answer but `UNAVAILABLE` or
//! `RESOURCE_EXHAUSTED`, in the headers, the trailers, or a proxy's bare
//! HTTP status), and rejects a new call locally, with `UNAVAILABLE` and
//! without sending it, with probability `max(0, (requests − K·accepts) /
//! (requests + 8))`, K being 2 by default. A backend refusing everything
//! then gets a handful of calls per lookback instead of every retry, and
//! is probed enough to be found again once it recovers. It stacks on a
//! tonic `Channel` (`ServiceBuilder::new().layer(throttle).service(channel)`)
//! under a generated client, takes no lock on a call, and knows nothing
//! of the server side ([`throttle`]).
//!
//! # Where it goes
//!
//! Inside [`RequireOrgIdLayer`](crate::tenant::RequireOrgIdLayer) (the order the
//! README's "Layer order" shows) it reads the tenants that layer validated
//! from the request's extensions; outside it, or without it, it reads
//! `x-scope-orgid` itself, borrowed, by the same rules. Either order
//! refuses and admits alike, with one difference: outside, a call that
//! `RequireOrgIdLayer` then refuses (a federated id it does not accept)
//! has been counted.
//!
//! # Rules
//!
//! - **No valid org id**: the call passes, unlimited and uncounted
//!   (`RequireOrgIdLayer` is the layer that refuses it).
//! - **A tenant without limits** (no override, unlimited defaults) costs
//!   no state and no atomic operation.
//! - **Federated ids** (`a|b`): the call is charged to every tenant named
//!   (one in-flight place and one token each) and admitted only if every
//!   one is under its limits; refused, it names the first tenant (in
//!   sorted order) that was over, and the tenants already charged get
//!   their place and token back. Its work charges go to every tenant
//!   named with a work rate, all or none, the same way.
//! - **Scope**: every request by default;
//!   [`only_methods`](TenantLimitLayer::only_methods) /
//!   [`only_services`](TenantLimitLayer::only_services) limit some
//!   methods only, sharing one state per tenant.
//! - **Plain HTTP** (axum routes beside gRPC, by `content-type`): limited
//!   like gRPC when in scope, refused with `429` and the message as text.
//! - **Changes**: a tenant keeps its state across a change of its
//!   limits: calls in flight still count against a new in-flight limit, and
//!   the calls its rate bucket counts still count under a new rate (at most
//!   an empty bucket's worth: raising a burst from 10 to 1 000 after 10
//!   calls leaves 990 at once, lowering it to 5 leaves an empty bucket, not
//!   a debt). A tenant that gets limits only counts the calls admitted from
//!   then on.
//!
//! # Across a fleet: one budget in Redis (feature `limits-redis`)
//!
//! With `TenantLimitLayer::shared(RedisBackend)`, each tenant's
//! call rate and work rate are one GCRA bucket in Redis or Valkey shared
//! by every replica (same Redis, same key prefix), instead of a bucket per
//! replica. Limits still come from each replica's defaults, overrides and
//! overrides file (keep them the same on every replica); Redis holds only
//! the buckets (`<prefix>:{<tenant>}:calls` and `:work`, a timestamp each,
//! expiring once full, and beside each its recent traffic,
//! `<bucket>:traffic`, expiring 25 s after the last lease: an idle tenant
//! costs nothing), each changed by a server-side script on the tenant's
//! hash slot (Redis Cluster works, and a slot that moves is followed: a
//! `MOVED` or `ASK` answer is retried on the node named, not counted as a
//! failure), on Redis's clock. **In-flight limits
//! stay per replica.**
//!
//! - **No round trip on a call.** A replica takes a *lease* (a number of
//!   units) from the tenant's bucket and spends it locally, with the same
//!   atomics as the local limiter; a background task asks for the next
//!   lease when a quarter is left. A lease covers about half a second of
//!   the tenant's recent rate on this replica (`LeasePolicy`); Redis
//!   grants at most `1 / replicas` of what its bucket holds, but at least
//!   a *batch*: 50 ms of the fleet's rate (`LeasePolicy::near_limit_batch`),
//!   or what is left. A lease that got less than it asked for names the
//!   time at which the bucket will hold a batch for every replica again;
//!   before it the replica asks Redis nothing for that tenant and refuses
//!   its calls locally, with that time as their pushback. So near and over
//!   the limit each request leases about a batch, however hard the tenant
//!   floods (Envoy's rate limit service keeps a local cache of keys over
//!   the limit for the same reason): each replica asks at most once per
//!   round of `replicas × batch`, so the fleet at most once per batch
//!   (20 times a second per tenant by default, whatever its rate or
//!   flood). A tenant under one unit a batch (under 20 calls a second)
//!   fetches nothing ahead near its limit: a unit fetched ahead would wait
//!   on its replica while a refused caller retries on another, which would
//!   find the bucket empty; its next call asks instead and waits for the
//!   answer. Measured (3 replicas, rate 1 000/s, burst 2 000, 80/15/5,
//!   10 s): about 10 Redis commands per 1 000 calls at 1× the rate, 8–11
//!   at 2×, 2–5 at 5× (up to 63 and 30 before batches).
//! - **The first call** of a tenant on a replica, and a call that finds
//!   the lease dry while the bucket had units at the last answer, is
//!   judged by the local fallback bucket and admitted *on credit*; the
//!   next lease request charges that debt to the fleet's bucket, whatever
//!   it holds. No admitted call from a lease or on credit waits on Redis.
//! - **A call the replica cannot judge alone** waits for its lease's
//!   answer, at most 20 ms (`LeasePolicy::answer_wait`), then is judged
//!   by it: admitted from the lease or refused with the fleet's pushback.
//!   That is a call that finds its replica's credit used up while the
//!   request charging it is in flight, or one the local fallback bucket
//!   would refuse (its wait is the replica's guess, not the fleet's: a
//!   replica that has not seen the tenant asks the fleet), or one that
//!   finds the bucket nearly empty by an answer whose wait is over. Past
//!   the 20 ms (a slow or paused Redis) it is refused with a 10 ms
//!   pushback. A federated call waits too, for each of its tenants'
//!   answers in turn, all within that one 20 ms. The wait needs the inner
//!   service to be `Clone` (tonic's are), as tower's own waiting
//!   middleware does.
//! - **Bounds.** Leased units were taken from the fleet's bucket before
//!   they are spent, so they never admit beyond `burst + rate × T`. Units
//!   admitted on credit are at most `max(1, 5 % × burst)` per replica and
//!   tenant until Redis confirms them, so over-admission at any moment is at
//!   most `replicas × max(1, 5 % × burst)`, and is paid back (the bucket
//!   then refuses as many). Under-admission is at most the units left in
//!   the replicas' leases (at most one lease each) and, when a flood stops,
//!   the units the bucket gathered towards the next round of batches (at
//!   most `replicas × batch`: 150 for a tenant at 1 000/s; they stay in the
//!   bucket); unspent units expire 2 s after their lease, so a replica
//!   never spends old units in a later burst. Measured: 3 replicas, rate
//!   1 000/s, burst 2 000, a load split 80/15/5 at 2× the rate for 10 s:
//!   the fleet admitted 11 895 of a budget of 11 994 (−0.8 %).
//! - **Refusals** carry the fleet-wide pushback, whichever replica
//!   refuses: the time until the tenant's bucket holds a unit (or, over
//!   the limit, the round of batches the replica waits for), from Redis's
//!   last answer, rounded up (at least 10 ms). A grpc-go client with a
//!   retry policy (`maxAttempts` 3), balancing round-robin over three
//!   replicas one call at a time, waits it out and is admitted on a later
//!   attempt, wherever that lands. A
//!   work charge refused by the fleet's bucket carries the pushback of the
//!   replica's last answer (a charge does not wait). A refusal names the
//!   fleet-wide rate.
//! - **Redis unavailable.** Every Redis operation has a timeout (250 ms
//!   by default); two failures in a row mark the backend down, and each
//!   replica falls back to a local bucket by its **share** of the tenant's
//!   fleet traffic: each lease answer tells the fleet's traffic on the
//!   bucket (the units every replica charged, decayed with a 5 s time
//!   constant) and the replica keeps its own part alike, so its share is
//!   `its part ÷ the fleet's`; it then admits `0.95 × share × rate` with
//!   a burst of `0.95 × share × burst` (at least 1). The share is of
//!   the traffic before the replica's latest lease (a lease is charged
//!   whole when granted: counting its own fresh one beside the others'
//!   older ones would overstate it), so the shares of one instant sum to
//!   at most about 1; read at different answers, the 5 % margin keeps the
//!   fleet under the rate: measured with Redis killed under the 80/15/5
//!   split at 2× the rate, the fleet admitted 0.94–0.95 R of calls and
//!   0.96–0.97 of its work rate, where `rate ÷ replicas` admits 0.73 R
//!   (333, 300 and 100 calls/s). A replica without a share (fewer than
//!   two lease answers, none in the last 10 s, or none with units for it)
//!   falls back
//!   to `rate ÷ replicas` and `burst ÷ replicas`, `replicas` being the
//!   count alive at the last heartbeat (each replica heartbeats a sorted
//!   set every second; alive for 3 s). Work rates fall back alike, by
//!   the replica's share of the tenant's work traffic.
//!   While down, the heartbeat probes every 250 ms; the first success
//!   marks it up and the fleet's buckets are used again (a Redis that lost
//!   its data starts them full). The change each way is logged once
//!   through `tracing`, without credentials; refused credentials later on
//!   (a rotation) count as unavailable. With feature `otel`,
//!   `RedisBackend::with_metrics` exports the backend's state: up or down,
//!   replicas alive, lease requests and failures, time waiting on leases,
//!   time in the fallback.
//!
//! # Cost and memory
//!
//! A limited call hashes its tenant id once (keyed SipHash), loads the
//! configuration (arc-swap: no lock, no shared reference count), finds
//! the tenant's state in a `papaya` map (lock-free reads), then updates
//! that tenant's atomics: a compare-and-swap on its rate bucket, one on
//! its in-flight count, and an `Arc` clone for the slot; ending the call
//! is one subtraction. Nothing on that path is shared by all tenants, so
//! tenants never contend with each other; a known tenant's call
//! allocates nothing. The pushback is computed on the refusal path only.
//! A tenant with a work rate costs its admitted calls one more `Arc`
//! clone and one allocation (the budget in the extensions); a charge is
//! one compare-and-swap on the tenant's own cache line (its work bucket
//! sits in the padding of its state: no extra memory).
//!
//! # Memory: eviction and the cap
//!
//! A tenant's state is evicted only when it is *idle*: no call in flight
//! and full rate and work buckets, exactly the state of a tenant never
//! seen, so evicting it loses nothing (the tenant's next call starts a fresh state
//! that behaves the same). It must also be unused since the last sweep:
//! sweeps run at most once per [idle
//! timeout](TenantLimitLayer::idle_timeout) (default 60 s), each clearing
//! the "seen" mark of the tenants with calls since the previous one and
//! evicting the idle tenants without it, so an idle tenant leaves after
//! one to two idle timeouts. Sweeps run when a new tenant arrives and the
//! last sweep is an idle timeout old, on
//! [`LimitsHandle::evict_idle`], and on each check of a watched overrides
//! file; without new tenants nothing grows.
//!
//! At most [`max_tenants`](TenantLimitLayer::max_tenants) tenants on the
//! default limits (default 10 000) have a state of their own; tenants with
//! an override always do (their number is bounded by the configuration).
//! A new tenant beyond the cap shares one overflow state, under the
//! defaults, with every other such tenant until sweeps make room. So
//! 100 000 distinct (hostile) org ids cost at most `max_tenants` states
//! (128 bytes each, plus the map's entry); they never evict a tenant seen
//! within the last idle timeout, one with a call in flight or one whose
//! bucket is not full, and beyond the cap they throttle only each other
//! (and a genuinely new tenant arriving during the flood, until the
//! flood's states age out). With a shared backend, a tenant's two leases
//! are one allocation more, made on its first call, that its state points
//! to.
//!
//! # Inside: floors
//!
//! Each file imports only from the floors below its own (or its own
//! floor, without a cycle); nothing imports back up.
//!
//! 1. **Vocabulary**: `config` (limits, rates), `gcra` (the bucket
//!    arithmetic), `refusal` and `overload` (the errors), `tenants` (the
//!    tenants a call names), `observer`, `otel`, `file`.
//! 2. **One tenant**: `state` (its atomics: in flight, the local call and
//!    work buckets, the slot a shared keeper fills, the call's `Slot`).
//! 3. **The seam**: `keeper`: where a tenant's rates are kept, chosen
//!    once when the layer is built: `Keeper::Local` (the buckets in the
//!    state, inline on the call's path, no dynamic call) or
//!    `Keeper::Shared` (a `SharedRates` trait object).
//! 4. **The configuration and the tenants**: `snapshot` (holds the
//!    keeper), `map` (the states, the clock).
//! 5. **Backends**: `shared/` (feature `limits-redis`), a leaf: it
//!    implements `SharedRates` on floors 1–4 and nothing in the limiter
//!    imports it.
//! 6. **Admission**: `limiter` (one call: scope, tenants, then per tenant
//!    the keeper's rate and an in-flight place), `budget` (work charges).
//! 7. **The tower face**: `layer`, `future`, `body`, `handle`, `watch`,
//!    `watch_otel`; and `fleet` (feature `limits-redis`), which plugs the
//!    Redis backend into the layer (`TenantLimitLayer::shared`) and the
//!    handle (`LimitsHandle::shared_status`).
//!
//!    `throttle/`, the client's [`AdaptiveThrottleLayer`], is a tower face
//!    of its own: its files import only each other and `wire`, nothing of
//!    floors 1–6.
//!
//! Adaptive admission (`adaptive/`) is a part of its own beside the
//! rates, with its own floors inside (the controller's arithmetic, the
//! tenants' shares and the window's stripes, then the shared state, then
//! its tower face): it imports only the vocabulary (floor 1) and touches
//! neither the rates' state, the seam nor their backends.

pub mod adaptive;
mod body;
mod budget;
mod config;
#[cfg(feature = "limits-file")]
mod file;
#[cfg(feature = "limits-redis")]
mod fleet;
mod future;
mod gcra;
mod handle;
mod keeper;
mod layer;
mod limiter;
mod map;
mod observer;
#[cfg(feature = "otel")]
mod otel;
mod overload;
mod refusal;
#[cfg(feature = "limits-redis")]
mod shared;
mod snapshot;
mod state;
mod tenants;
pub mod throttle;
#[cfg(feature = "limits-file")]
mod watch;
#[cfg(all(feature = "otel", feature = "limits-file"))]
mod watch_otel;

pub use adaptive::{AdaptiveHandle, AdaptiveLimit, AdaptiveLimitLayer, AdaptiveStatus, Gradient};
pub use body::{InFlightSlot, ResponseBody};
pub use budget::{TenantBudget, TenantBudgetExt};
pub use config::{InvalidRateError, Limits, Rate};
#[cfg(feature = "limits-file")]
pub use file::{LimitsFileError, OverridesError, parse_overrides};
pub use future::ResponseFuture;
pub use handle::LimitsHandle;
pub use layer::{TenantLimit, TenantLimitLayer};
pub use observer::LimitObserver;
#[cfg(feature = "otel")]
pub use otel::{LimitMetrics, TenantLabels};
pub use overload::{OverloadError, OverloadReason};
pub use refusal::{LimitError, LimitKind};
#[cfg(feature = "limits-redis")]
pub use shared::{
    LeasePolicy, RedisBackend, RedisBackendBuilder, RedisBackendError, RedisBackendErrorKind,
    RedisBackendStatus,
};
pub use throttle::{AdaptiveThrottle, AdaptiveThrottleLayer, InvalidThrottleError, ThrottleCounts};
#[cfg(feature = "limits-file")]
pub use watch::FileWatch;
