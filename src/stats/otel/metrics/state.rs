//! [`MetricsRpcState`]: what [`OtelMetrics`](super::OtelMetrics) keeps
//! per RPC.

use super::methods::RecordedMethod;
use super::unproven::UnprovenPath;
use crate::stats::Side;

/// [`OtelMetrics`](super::OtelMetrics)' per-RPC state: how the RPC's
/// method is recorded and the message bytes sent and received so far.
/// Stored inline by the layer (it is the handler's
/// [`StatsHandler::RpcState`](crate::stats::StatsHandler::RpcState));
/// nothing to build by hand.
///
/// ```
/// use tonic_hotpath::stats::StatsHandler;
/// use tonic_hotpath::stats::otel::{MetricsRpcState, OtelMetrics};
///
/// fn state_of<H: StatsHandler<RpcState = MetricsRpcState>>(_: &H) {}
/// # let metrics = OtelMetrics::builder(&opentelemetry::metrics::NoopMeterProvider::new()).build().unwrap();
/// state_of(&metrics);
/// ```
#[derive(Debug, Default)]
pub struct MetricsRpcState {
    pub(super) method: RpcMethod,
    pub(super) sent: u64,
    pub(super) rcvd: u64,
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
