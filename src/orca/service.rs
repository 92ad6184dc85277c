//! The out-of-band load reporting service (`xds.service.orca.v3.OpenRcaService`,
//! grpc-go's `orca.Service`): a client opens `StreamCoreMetrics` and gets
//! the process's current metrics at once, then again on every interval,
//! until it goes away.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use tokio::time::{Interval, MissedTickBehavior};
use tonic::{Request, Response, Status};

use super::metrics::ServerMetricsProvider;
use super::proto::xds::data::orca::v3::OrcaLoadReport;
use super::proto::xds::service::orca::v3::OrcaLoadReportRequest;
use super::proto::xds::service::orca::v3::open_rca_service_server::{
    OpenRcaService as OpenRcaServiceTrait, OpenRcaServiceServer,
};

/// The shortest interval a stream ever ticks at, whatever the configured
/// minimum (a minimum of zero would otherwise spin).
const FLOOR: Duration = Duration::from_millis(1);

/// The longest interval a stream ticks at: a longer request is served
/// yearly (a timer past it is of no use, and far deadlines overflow).
const CEILING: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// gRPC's out-of-band load reporting service, as grpc-go's `orca.Service`:
/// each `StreamCoreMetrics` call gets its process's metrics (a
/// [`ServerMetricsProvider`], such as a `ServerMetricsRecorder`) at once,
/// then once per reporting interval, until the client cancels it.
///
/// The reporting interval is the request's `report_interval`, or the
/// service's minimum when the request has none, or a negative one, or one
/// below the minimum (grpc-go's `determineReportingInterval`). The minimum
/// defaults to 30 s, grpc-go's; unlike grpc-go, which only lets its own
/// tests go lower, any minimum may be configured: zero means "no minimum",
/// but a stream never ticks faster than once per millisecond. An interval
/// longer than a year is served yearly.
///
/// Only the process-wide values are sent: CPU, memory and application
/// utilization, QPS, EPS and the named utilizations. Request costs and
/// named metrics are per call ("not sent OOB", grpc-go's
/// `ServerMetrics` says): they are left out of every report here.
///
/// Each call's stream is a timer and a handle on the provider, polled by
/// tonic as it sends: nothing is spawned, and when the client cancels (or
/// the connection goes) tonic drops the stream and nothing of the call
/// keeps running. grpc-go's `Register` fails when no provider is given;
/// here a service cannot be built without one.
///
/// ```no_run
/// use std::time::Duration;
/// use tonic_hotpath::orca::{BackendMetrics, OrcaService, ServerMetricsProvider};
///
/// struct Fixed;
///
/// impl ServerMetricsProvider for Fixed {
///     fn server_metrics(&self) -> BackendMetrics {
///         let mut metrics = BackendMetrics::default();
///         metrics.cpu_utilization = Some(0.5);
///         metrics
///     }
/// }
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let orca = OrcaService::builder(Fixed)
///     .min_reporting_interval(Duration::from_secs(1))
///     .build();
/// tonic::transport::Server::builder()
///     .add_service(orca.into_server())
///     .serve("127.0.0.1:50051".parse()?)
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct OrcaService {
    provider: Arc<dyn ServerMetricsProvider>,
    min_interval: Duration,
}

impl std::fmt::Debug for OrcaService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrcaService")
            .field("min_reporting_interval", &self.min_interval)
            .finish_non_exhaustive()
    }
}

/// Builds an [`OrcaService`] ([`OrcaService::builder`]).
#[derive(Clone)]
#[must_use]
pub struct OrcaServiceBuilder {
    service: OrcaService,
}

impl std::fmt::Debug for OrcaServiceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OrcaServiceBuilder")
            .field(&self.service)
            .finish()
    }
}

impl OrcaServiceBuilder {
    /// The lowest reporting interval a client may ask for (default
    /// [`OrcaService::DEFAULT_MIN_REPORTING_INTERVAL`], 30 s). Zero
    /// means no minimum, but a stream never ticks faster than once per
    /// millisecond.
    pub fn min_reporting_interval(mut self, interval: Duration) -> Self {
        self.service.min_interval = interval;
        self
    }

    /// The service.
    pub fn build(self) -> OrcaService {
        self.service
    }
}

impl OrcaService {
    /// grpc-go's minimum reporting interval, the default: 30 s.
    pub const DEFAULT_MIN_REPORTING_INTERVAL: Duration = Duration::from_secs(30);

    /// A service reporting `provider`'s metrics, with the default minimum
    /// interval (30 s).
    pub fn new(provider: impl ServerMetricsProvider) -> Self {
        Self::builder(provider).build()
    }

    /// A builder for a service reporting `provider`'s metrics.
    pub fn builder(provider: impl ServerMetricsProvider) -> OrcaServiceBuilder {
        OrcaServiceBuilder {
            service: OrcaService {
                provider: Arc::new(provider),
                min_interval: Self::DEFAULT_MIN_REPORTING_INTERVAL,
            },
        }
    }

    /// The configured minimum reporting interval.
    pub fn min_reporting_interval(&self) -> Duration {
        self.min_interval
    }

    /// The interval a stream opened with `request` reports at: the
    /// request's `report_interval`, or the minimum when it has none, or a
    /// negative one, or one below the minimum (grpc-go's
    /// `determineReportingInterval`); never under 1 ms nor over a year.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tonic_hotpath::orca::{BackendMetrics, OrcaService, ServerMetricsProvider};
    /// use tonic_hotpath::orca::proto::xds::service::orca::v3::OrcaLoadReportRequest;
    ///
    /// struct Idle;
    /// impl ServerMetricsProvider for Idle {
    ///     fn server_metrics(&self) -> BackendMetrics {
    ///         BackendMetrics::default()
    ///     }
    /// }
    ///
    /// let service = OrcaService::builder(Idle)
    ///     .min_reporting_interval(Duration::from_secs(1))
    ///     .build();
    /// let ask = |seconds| OrcaLoadReportRequest {
    ///     report_interval: Some(prost_types::Duration { seconds, nanos: 0 }),
    ///     ..Default::default()
    /// };
    /// assert_eq!(service.reporting_interval(&ask(5)), Duration::from_secs(5));
    /// assert_eq!(service.reporting_interval(&ask(0)), Duration::from_secs(1));
    /// assert_eq!(service.reporting_interval(&ask(-5)), Duration::from_secs(1));
    /// assert_eq!(
    ///     service.reporting_interval(&OrcaLoadReportRequest::default()),
    ///     Duration::from_secs(1)
    /// );
    /// ```
    pub fn reporting_interval(&self, request: &OrcaLoadReportRequest) -> Duration {
        let minimum = self.min_interval.clamp(FLOOR, CEILING);
        let Some(asked) = request.report_interval.as_ref() else {
            return minimum;
        };
        let (Ok(seconds), Ok(nanos)) = (u64::try_from(asked.seconds), u32::try_from(asked.nanos))
        else {
            return minimum;
        };
        // At most i64::MAX seconds plus under 2^31 ns: no overflow.
        let asked = Duration::from_secs(seconds).saturating_add(Duration::from_nanos(nanos.into()));
        asked.clamp(minimum, CEILING)
    }

    /// The tonic service to add to a `Server` (the generated
    /// `OpenRcaServiceServer::new(self)`).
    pub fn into_server(self) -> OpenRcaServiceServer<Self> {
        OpenRcaServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl OpenRcaServiceTrait for OrcaService {
    type StreamCoreMetricsStream = ReportStream;

    async fn stream_core_metrics(
        &self,
        request: Request<OrcaLoadReportRequest>,
    ) -> Result<Response<ReportStream>, Status> {
        let period = self.reporting_interval(request.get_ref());
        // The first tick completes at once: the first report goes out now.
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ok(Response::new(ReportStream {
            provider: Arc::clone(&self.provider),
            interval,
        }))
    }
}

/// The responses of one `StreamCoreMetrics` call: the provider's metrics
/// (without request costs and named metrics) at once, then once per
/// interval; a tick missed while the client is slow to read is delayed,
/// not made up for. It never ends on its own: it lives until tonic drops
/// it, when the client cancels or the connection closes.
pub struct ReportStream {
    provider: Arc<dyn ServerMetricsProvider>,
    interval: Interval,
}

impl std::fmt::Debug for ReportStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportStream")
            .field("period", &self.interval.period())
            .finish_non_exhaustive()
    }
}

impl Stream for ReportStream {
    type Item = Result<OrcaLoadReport, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.interval.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(out_of_band_report(&*this.provider)))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The provider's current values as an out-of-band report: request costs
/// and named metrics are per call and are not sent.
fn out_of_band_report(provider: &dyn ServerMetricsProvider) -> OrcaLoadReport {
    let mut metrics = provider.server_metrics();
    metrics.request_cost.clear();
    metrics.named_metrics.clear();
    metrics.to_report()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orca::BackendMetrics;

    struct Everything;

    impl ServerMetricsProvider for Everything {
        fn server_metrics(&self) -> BackendMetrics {
            let mut metrics = BackendMetrics {
                cpu_utilization: Some(0.5),
                qps: Some(3.0),
                ..BackendMetrics::default()
            };
            metrics.utilization.insert("disk".into(), 0.25);
            metrics.request_cost.insert("rows".into(), 7.0);
            metrics.named_metrics.insert("hits".into(), 1.0);
            metrics
        }
    }

    fn ask(seconds: i64, nanos: i32) -> OrcaLoadReportRequest {
        OrcaLoadReportRequest {
            report_interval: Some(prost_types::Duration { seconds, nanos }),
            ..OrcaLoadReportRequest::default()
        }
    }

    #[test]
    fn interval_follows_grpc_go_and_never_spins() {
        let default = OrcaService::new(Arc::new(Everything));
        assert_eq!(default.min_reporting_interval(), Duration::from_secs(30));
        assert_eq!(
            default.reporting_interval(&OrcaLoadReportRequest::default()),
            Duration::from_secs(30)
        );
        assert_eq!(
            default.reporting_interval(&ask(10, 0)),
            Duration::from_secs(30)
        );
        assert_eq!(
            default.reporting_interval(&ask(31, 5)),
            Duration::new(31, 5)
        );
        let zero = OrcaService::builder(Arc::new(Everything))
            .min_reporting_interval(Duration::ZERO)
            .build();
        assert_eq!(
            zero.reporting_interval(&OrcaLoadReportRequest::default()),
            FLOOR
        );
        assert_eq!(zero.reporting_interval(&ask(0, 0)), FLOOR);
        assert_eq!(zero.reporting_interval(&ask(0, 1_000)), FLOOR);
        assert_eq!(zero.reporting_interval(&ask(0, -1)), FLOOR);
        assert_eq!(zero.reporting_interval(&ask(-1, 0)), FLOOR);
        assert_eq!(
            zero.reporting_interval(&ask(0, 2_000_000)),
            Duration::from_millis(2)
        );
        assert_eq!(zero.reporting_interval(&ask(i64::MAX, i32::MAX)), CEILING);
    }

    #[test]
    fn out_of_band_reports_leave_per_call_values_out() {
        let report = out_of_band_report(&Everything);
        assert_eq!(report.cpu_utilization, 0.5);
        assert_eq!(report.rps_fractional, 3.0);
        assert_eq!(report.utilization["disk"], 0.25);
        assert!(report.request_cost.is_empty());
        assert!(report.named_metrics.is_empty());
    }
}
