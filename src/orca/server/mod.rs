//! The server side of per-call reports, shaped as tower shapes a
//! middleware: [`CallMetricsLayer`] and its service [`CallMetrics`] make
//! each call's [`CallMetricsRecorder`](crate::orca::CallMetricsRecorder)
//! reachable from its handler, and write what was recorded into the
//! call's trailers (grpc-go's `orca.CallMetricsServerOption`).
//!
//! - `layer.rs`: the layer, its builder and its service.
//! - `future.rs`: the response future (a trailers-only answer gets its
//!   report in the response headers).
//! - `body.rs`: the response body (the report joins the trailers).

mod body;
mod future;
mod layer;

pub use body::ResponseBody;
pub use future::ResponseFuture;
pub use layer::{CallMetrics, CallMetricsLayer, CallMetricsLayerBuilder};

use std::sync::Arc;

use http::HeaderMap;

use super::encode::grpc_binary_value;
use super::recorder::ServerMetricsRecorder;
use super::{BackendMetrics, ReportFormat, ServerMetricsProvider};

/// What a layer's calls share: the process's values and the report's form.
#[derive(Clone)]
pub(crate) struct ReportConfig {
    pub(crate) server_metrics: Option<ServerMetrics>,
    pub(crate) format: ReportFormat,
}

/// Where the process's values come from.
#[derive(Clone)]
pub(crate) enum ServerMetrics {
    /// The crate's recorder, read without a copy.
    Recorder(ServerMetricsRecorder),
    /// Any other provider.
    Provider(Arc<dyn ServerMetricsProvider>),
}

impl ReportConfig {
    /// Adds the report of a call whose handler took `recorder` to
    /// `headers` (its trailers, or a trailers-only answer's headers): the
    /// process's values overridden by the call's (gRFC A51), as grpc-go's
    /// `setTrailerMetadata`. Sent even when nothing was set, as grpc-go
    /// sends it once the handler took the recorder.
    pub(crate) fn write_report(
        &self,
        recorder: &crate::orca::CallMetricsRecorder,
        headers: &mut HeaderMap,
    ) {
        let (name, value) = recorder.lock(|call| {
            if self.format == ReportFormat::GrpcBinary {
                // The common form, encoded straight from both sides.
                let value = match &self.server_metrics {
                    None => grpc_binary_value(None, call),
                    Some(ServerMetrics::Recorder(process)) => {
                        grpc_binary_value(Some(&process.load()), call)
                    }
                    Some(ServerMetrics::Provider(provider)) => {
                        grpc_binary_value(Some(&provider.server_metrics()), call)
                    }
                };
                return (ReportFormat::GRPC_TRAILER, value);
            }
            let report = match &self.server_metrics {
                None => call.to_report(),
                Some(ServerMetrics::Recorder(process)) => merged(&process.load(), call),
                Some(ServerMetrics::Provider(provider)) => merged(&provider.server_metrics(), call),
            };
            self.format.header(&report)
        });
        headers.append(name, value);
    }
}

/// The report of `process` overridden by `call`.
fn merged(process: &BackendMetrics, call: &BackendMetrics) -> super::OrcaLoadReport {
    let mut both = process.clone();
    both.merge(call);
    both.to_report()
}

impl std::fmt::Debug for ReportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportConfig")
            .field(
                "server_metrics",
                &match &self.server_metrics {
                    None => "none",
                    Some(ServerMetrics::Recorder(_)) => "ServerMetricsRecorder",
                    Some(ServerMetrics::Provider(_)) => "ServerMetricsProvider",
                },
            )
            .field("format", &self.format)
            .finish()
    }
}
