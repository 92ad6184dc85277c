//! The per-call reader ([`LoadReports`]): a client stats handler
//! that feeds each call's `endpoint-load-metrics-bin` trailer to its
//! endpoint.

use std::fmt;

use super::weight::EndpointWeight;
use crate::orca::load_report_from;
#[cfg(doc)]
use crate::stats::CombinedLayer;
use crate::stats::{RpcEvent, StatsHandler};

/// The load reports of one endpoint's calls, as a stats handler: reads
/// each call's report (the `endpoint-load-metrics-bin` trailer, or the
/// header of a trailers-only response) and feeds it to
/// one endpoint's [`EndpointWeight`], with grpc-go's rules
/// ([`load_report_from`]). Register it on the client [`CombinedLayer`] of
/// that endpoint's channel: one handler per endpoint.
///
/// A malformed report (several values, not base64, not an
/// `OrcaLoadReport`) is counted ([`malformed_reports`](Self::malformed_reports)),
/// logged nowhere, and leaves the weight as it was. The handler reads
/// trailers only: it asks the layer for no payload times, sizes or bytes.
///
/// ```
/// use tonic_hotpath::orca::client::EndpointWeights;
/// use tonic_hotpath::stats::CombinedLayer;
///
/// let group = EndpointWeights::default();
/// let endpoint = group.endpoint();
/// let layer = CombinedLayer::client().with(endpoint.stats_handler());
/// // ServiceBuilder::new().layer(layer).service(channel), then endpoint.load(..)
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct LoadReports {
    endpoint: EndpointWeight,
}

impl EndpointWeight {
    /// The stats handler that feeds this endpoint from its calls'
    /// trailers.
    pub fn stats_handler(&self) -> LoadReports {
        LoadReports {
            endpoint: self.clone(),
        }
    }
}

impl LoadReports {
    /// The endpoint it feeds.
    pub fn endpoint(&self) -> &EndpointWeight {
        &self.endpoint
    }

    /// Calls whose report could not be read (the endpoint's
    /// [`EndpointWeight::malformed_reports`]).
    pub fn malformed_reports(&self) -> u64 {
        self.endpoint.malformed_reports()
    }
}

impl StatsHandler for LoadReports {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::InTrailer(trailers) = event {
            match load_report_from(trailers) {
                Ok(Some(report)) => self.endpoint.on_load_report(&report),
                Ok(None) => {}
                Err(_) => self.endpoint.count_malformed(),
            }
        }
    }
}

impl fmt::Debug for LoadReports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadReports")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;
    use crate::orca::client::{EndpointWeights, WeightConfig};
    use crate::orca::{OrcaLoadReport, ReportFormat};

    #[test]
    fn feeds_good_reports_and_counts_bad_ones() {
        let config = WeightConfig::builder()
            .blackout_period(std::time::Duration::ZERO)
            .build()
            .unwrap();
        let endpoint = EndpointWeights::new(config).endpoint();
        let handler = endpoint.stats_handler();
        let report = OrcaLoadReport {
            cpu_utilization: 0.5,
            rps_fractional: 10.0,
            ..OrcaLoadReport::default()
        };
        let (name, value) = ReportFormat::GrpcBinary.header(&report);
        let mut good = HeaderMap::new();
        good.insert(name, value.clone());
        handler.handle_rpc(&mut (), &RpcEvent::InTrailer(&good));
        assert_eq!(endpoint.weight(), Some(20.0));

        let mut several = good.clone();
        several.append(ReportFormat::GRPC_TRAILER, value);
        let mut junk = HeaderMap::new();
        junk.insert(ReportFormat::GRPC_TRAILER, HeaderValue::from_static("!!!"));
        for bad in [&several, &junk] {
            handler.handle_rpc(&mut (), &RpcEvent::InTrailer(bad));
        }
        assert_eq!(handler.malformed_reports(), 2);
        assert_eq!(endpoint.weight(), Some(20.0));
        // No report at all is nothing.
        handler.handle_rpc(&mut (), &RpcEvent::InTrailer(&HeaderMap::new()));
        assert_eq!(endpoint.reports(), 1);
        assert_eq!(handler.malformed_reports(), 2);
    }
}
