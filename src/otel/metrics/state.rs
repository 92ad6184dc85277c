//! [`MetricsRpcState`]: what [`OtelMetrics`](super::OtelMetrics) keeps
//! per RPC.

use super::methods::RecordedMethod;
#[cfg(feature = "tenant")]
use super::tenants::RecordedTenant;
use super::unproven::UnprovenPath;
use crate::stats::Side;
#[cfg(feature = "tenant")]
use crate::tenant::OrgId;

/// [`OtelMetrics`](super::OtelMetrics)' per-RPC state: how the RPC's
/// method (and tenant) is recorded and the message bytes sent and
/// received so far.
/// Stored inline by the layer (it is the handler's
/// [`StatsHandler::RpcState`](crate::stats::StatsHandler::RpcState));
/// nothing to build by hand.
///
/// ```
/// use tonic_hotpath::stats::StatsHandler;
/// use tonic_hotpath::otel::{MetricsRpcState, OtelMetrics};
///
/// fn state_of<H: StatsHandler<RpcState = MetricsRpcState>>(_: &H) {}
/// # let metrics = OtelMetrics::builder(&opentelemetry::metrics::NoopMeterProvider::new()).build().unwrap();
/// state_of(&metrics);
/// ```
#[derive(Debug, Default)]
pub struct MetricsRpcState {
    pub(super) method: RpcMethod,
    #[cfg(feature = "tenant")]
    pub(super) tenant: RpcTenant,
    /// `Begin` came while the method or tenant was unsettled: `*.started`
    /// is counted once both are.
    pub(super) start_deferred: bool,
    pub(super) sent: u64,
    pub(super) rcvd: u64,
    /// Client: the call this RPC is an attempt of, when a retrying layer
    /// made it one (its `grpc.client.call.duration` is the call's).
    pub(super) call: Option<crate::stats::CallValue<super::call::CallRecord>>,
}

impl MetricsRpcState {
    /// Whether the method or the tenant waits for a later event.
    #[inline]
    pub(super) fn is_unsettled(&self) -> bool {
        #[cfg(feature = "tenant")]
        let tenant_unsettled = matches!(self.tenant, RpcTenant::Awaiting | RpcTenant::Unproven(_));
        #[cfg(not(feature = "tenant"))]
        let tenant_unsettled = false;
        matches!(self.method, RpcMethod::Unproven(_)) || tenant_unsettled
    }

    /// The RPC's side, unless the layer made the state without `tag_rpc`.
    #[inline]
    pub(super) fn side(&self) -> Option<Side> {
        match self.method {
            RpcMethod::Untagged => None,
            RpcMethod::Known { side, .. } => Some(side),
            RpcMethod::Unproven(_) => Some(Side::Server),
        }
    }
}

/// How an RPC's method is recorded.
#[derive(Debug, Default)]
pub(super) enum RpcMethod {
    /// A state the layer made without `tag_rpc`: nothing is recorded.
    #[default]
    Untagged,
    /// Recorded as `method`. Its `*.started` was counted at `Begin`, or
    /// when the method was proven (for a state that was
    /// [`Unproven`](Self::Unproven)).
    Known { side: Side, method: RecordedMethod },
    /// A server RPC of a method that may be learned but that the server
    /// has not been seen to serve: `*.started` waits for the proof (or
    /// `End`).
    Unproven(UnprovenPath),
}

/// How an RPC's tenant is recorded.
#[cfg(feature = "tenant")]
#[derive(Debug, Default)]
pub(super) enum RpcTenant {
    /// The handler records no tenant.
    #[default]
    Off,
    /// The request headers are still to come (a client's `OutHeader`, a
    /// server's `InHeader`).
    Awaiting,
    /// Recorded as the tenant.
    Recorded(RecordedTenant),
    /// A server RPC of a valid tenant that may be learned but that the
    /// server has not been seen to serve: `*.started` waits for the proof
    /// (or `End`), as for an [`RpcMethod::Unproven`].
    Unproven(OrgId),
}

#[cfg(feature = "tenant")]
impl RpcTenant {
    /// How the tenant is recorded, `None` if the handler records none.
    #[inline]
    pub(super) fn recorded(&self) -> Option<RecordedTenant> {
        match self {
            RpcTenant::Recorded(tenant) => Some(*tenant),
            // Not reached once settled: only `Off` is left.
            _ => None,
        }
    }
}
