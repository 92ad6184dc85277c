//! [`LimitMetrics`] (feature `otel`): the limiter's refusals as an
//! OpenTelemetry counter, by tenant and reason, with the tenant attribute
//! under a cardinality guard.

use std::fmt;
use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::{AtomicUsize, Ordering};

use opentelemetry::metrics::AsyncInstrument;
use opentelemetry::metrics::{Counter, Meter, MeterProvider};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue};

use super::observer::LimitObserver;
use super::overload::OverloadError;
use super::refusal::LimitError;
use crate::tenant::OrgId;

impl LimitMetrics {
    /// The counter's name.
    pub const REJECTIONS: &str = "tonic_hotpath.tenant.limit.rejections";
    /// The tenant attribute's key: the key `OtelMetrics`' tenant attribute uses
    /// by default (`grpc.tenant`, `grpc_tenant` in Prometheus), so refusals join
    /// the request metrics on one label.
    pub const TENANT_KEY: &str = "grpc.tenant";
    /// The reason attribute's key (`in_flight_limited`, `rate_limited`).
    pub const REASON_KEY: &str = "reason";
    /// The tenant attribute's value for tenants the guard does not name.
    pub const OTHER_TENANT: &str = "other";
    /// The tenant attribute's value for a call without a valid org id
    /// (refused by [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer)).
    pub const NO_TENANT: &str = "none";
}

/// Counts [`TenantLimitLayer`](super::TenantLimitLayer)'s refusals as the
/// OpenTelemetry counter `tonic_hotpath.tenant.limit.rejections`
/// (unit `{call}`) with the attributes `grpc.tenant` and `reason`
/// ([`LimitKind::reason`](super::LimitKind::reason):
/// `in_flight_limited`, `rate_limited`), as Cortex counts its discarded
/// samples per tenant and reason; and, as the observer of an
/// [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer), its refusals for
/// overload on the same counter ([`OverloadReason::as_str`](super::OverloadReason::as_str):
/// `concurrency_limited`, `shed_first`, `deadline_too_short`; a call
/// without an org id as tenant `none`).
///
/// Tenant ids come from clients, so the `grpc.tenant` attribute is guarded:
/// [`TenantLabels`] names a fixed allow-list of tenants, or the first K
/// seen, and every other tenant counts as `other`; a flood of made-up
/// ids adds one series per reason, not one per id.
///
/// ```
/// use opentelemetry::metrics::MeterProvider;
/// use opentelemetry_sdk::metrics::SdkMeterProvider;
/// use tonic_hotpath::limits::{LimitMetrics, Limits, TenantLabels, TenantLimitLayer};
///
/// let provider = SdkMeterProvider::default();
/// let metrics = LimitMetrics::new(&provider, TenantLabels::first_seen(100));
/// let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(64)).observer(metrics);
/// # drop(layer);
/// ```
pub struct LimitMetrics {
    rejections: Counter<u64>,
    labels: TenantLabels,
}

impl fmt::Debug for LimitMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitMetrics")
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl LimitMetrics {
    /// The counter from `provider`'s meter named `tonic-hotpath` (with the
    /// crate's version), the tenant attribute guarded by `labels`.
    pub fn new<P: MeterProvider + ?Sized>(provider: &P, labels: TenantLabels) -> Self {
        let rejections = crate_meter(provider)
            .u64_counter(LimitMetrics::REJECTIONS)
            .with_unit("{call}")
            .with_description("Calls refused by a per-tenant limit, by tenant and reason.")
            .build();
        Self { rejections, labels }
    }
}

impl LimitObserver for LimitMetrics {
    fn on_refused(&self, refused: &LimitError) {
        let attributes = [
            self.labels.label(refused.tenant()),
            KeyValue::new(LimitMetrics::REASON_KEY, refused.limit().reason()),
        ];
        self.rejections.add(1, &attributes);
    }

    fn on_overloaded(&self, refused: &OverloadError) {
        let tenant = match refused.tenant() {
            Some(tenant) => self.labels.label(tenant),
            None => KeyValue::new(LimitMetrics::TENANT_KEY, LimitMetrics::NO_TENANT),
        };
        let attributes = [
            tenant,
            KeyValue::new(LimitMetrics::REASON_KEY, refused.reason().as_str()),
        ];
        self.rejections.add(1, &attributes);
    }
}

/// Which tenants get their own `grpc.tenant` attribute value: a fixed
/// allow-list, or the first K tenants seen; every other tenant is
/// `other`. Built attribute values are kept, so a refusal of a named
/// tenant allocates no string.
pub struct TenantLabels {
    /// The tenants named so far (all of them for an allow-list) and their
    /// attribute.
    named: papaya::HashMap<OrgId, KeyValue>,
    /// How many more tenants may be named (0 for an allow-list).
    room: AtomicUsize,
}

impl fmt::Debug for TenantLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantLabels")
            .field("named", &self.named.len())
            .field("room", &self.room.load(Ordering::Relaxed))
            .finish()
    }
}

impl TenantLabels {
    /// Names exactly these tenants; every other one is `other`.
    pub fn allow_list(tenants: impl IntoIterator<Item = OrgId>) -> Self {
        let named = papaya::HashMap::new();
        {
            let named = named.pin();
            for tenant in tenants {
                let label = label_of(&tenant);
                named.insert(tenant, label);
            }
        }
        Self {
            named,
            room: AtomicUsize::new(0),
        }
    }

    /// Names the first `max` tenants refused (in the order they are first
    /// refused); every later one is `other`.
    pub fn first_seen(max: usize) -> Self {
        Self {
            named: papaya::HashMap::new(),
            room: AtomicUsize::new(max),
        }
    }

    /// The `grpc.tenant` attribute of `tenant`.
    pub fn label(&self, tenant: &OrgId) -> KeyValue {
        let named = self.named.pin();
        if let Some(label) = named.get(tenant.as_str()) {
            return label.clone();
        }
        let claimed = self
            .room
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |room| {
                room.checked_sub(1)
            })
            .is_ok();
        if !claimed {
            return KeyValue::new(LimitMetrics::TENANT_KEY, LimitMetrics::OTHER_TENANT);
        }
        match named.try_insert(tenant.clone(), label_of(tenant)) {
            Ok(label) => label.clone(),
            Err(occupied) => {
                // Named meanwhile by another thread: give the room back.
                self.room.fetch_add(1, Ordering::AcqRel);
                occupied.current.clone()
            }
        }
    }
}

fn label_of(tenant: &OrgId) -> KeyValue {
    KeyValue::new(
        LimitMetrics::TENANT_KEY,
        StringValue::from(Arc::<str>::from(tenant.as_str())),
    )
}

/// `provider`'s meter named `tonic-hotpath`, with the crate's version: the
/// one every `limits` instrument comes from.
pub(crate) fn crate_meter<P: MeterProvider + ?Sized>(provider: &P) -> Meter {
    let scope = InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    provider.meter_with_scope(scope)
}

/// An observed instrument's callback: `value` of the state behind `state`
/// with the one attribute `attribute`; nothing once the state is gone or
/// while `value` is `None`. (A watched file's metrics and a shared
/// backend's and an adaptive limit's read their own counters this way.)
pub(crate) fn observe<S, T>(
    state: &Weak<S>,
    attribute: &KeyValue,
    value: impl Fn(&S) -> Option<T> + Send + Sync + 'static,
) -> impl Fn(&dyn AsyncInstrument<T>) + Send + Sync + 'static
where
    S: Send + Sync + 'static,
{
    let state = state.clone();
    let attributes = [attribute.clone()];
    move |instrument| {
        if let Some(value) = state.upgrade().as_deref().and_then(&value) {
            instrument.observe(value, &attributes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Value;

    fn id(text: &str) -> OrgId {
        OrgId::new(text).unwrap()
    }

    fn value(label: KeyValue) -> String {
        match label.value {
            Value::String(text) => text.as_str().to_owned(),
            other => panic!("not a string: {other:?}"),
        }
    }

    #[test]
    fn an_allow_list_names_only_its_tenants() {
        let labels = TenantLabels::allow_list([id("a"), id("b")]);
        assert_eq!(value(labels.label(&id("a"))), "a");
        assert_eq!(value(labels.label(&id("c"))), "other");
        assert_eq!(value(labels.label(&id("b"))), "b");
    }

    #[test]
    fn first_seen_names_the_first_k_tenants_for_good() {
        let labels = TenantLabels::first_seen(2);
        assert_eq!(value(labels.label(&id("x"))), "x");
        assert_eq!(value(labels.label(&id("x"))), "x");
        assert_eq!(value(labels.label(&id("y"))), "y");
        for other in ["z", "w"] {
            assert_eq!(value(labels.label(&id(other))), "other");
        }
        assert_eq!(value(labels.label(&id("x"))), "x");
        assert_eq!(labels.named.len(), 2);
    }
}
