//! The out-of-band reader ([`OobWatcher`], grpc-go's ORCA producer): one
//! `StreamCoreMetrics` stream per endpoint, re-opened after errors with
//! backoff, feeding each report to the endpoint.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tonic::client::GrpcService;
use tonic::codegen::{Body, StdError};
use tonic::{Code, Status};

use super::weight::EndpointWeight;
use crate::orca::proto::xds::service::orca::v3::OrcaLoadReportRequest;
use crate::orca::proto::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;

/// Starts an [`OobWatcher`] ([`EndpointWeight::out_of_band`]).
///
/// Defaults: a 10 s report interval (gRFC A58's `oob_reporting_period`),
/// and gRPC's connection backoff between failed streams (1 s, times 1.6
/// per attempt up to 120 s, ±20 % jitter).
#[derive(Clone, Debug)]
pub struct OobWatcherBuilder {
    endpoint: EndpointWeight,
    report_interval: Duration,
    base_delay: Duration,
    max_delay: Duration,
}

impl EndpointWeight {
    /// A watcher of this endpoint's out-of-band reports, to be started on
    /// the endpoint's channel with [`OobWatcherBuilder::spawn`].
    pub fn out_of_band(&self) -> OobWatcherBuilder {
        OobWatcherBuilder {
            endpoint: self.clone(),
            report_interval: Duration::from_secs(10),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(120),
        }
    }
}

impl OobWatcherBuilder {
    /// The interval asked of the server (it may send less often: its
    /// minimum reporting interval wins).
    #[must_use]
    pub fn report_interval(mut self, interval: Duration) -> Self {
        self.report_interval = interval;
        self
    }

    /// The backoff between streams that ended before any report: `base`
    /// after the first, then 1.6 times more each time, up to `max`
    /// (jittered ±20 %). A stream that delivered a report is re-opened at
    /// once, as grpc-go does.
    #[must_use]
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base_delay = base;
        self.max_delay = max.max(base);
        self
    }

    /// Starts watching on `channel` (the endpoint's channel: a tonic
    /// `Channel`, or any service a generated client takes) in a task of
    /// the current tokio runtime, which must have its timer enabled.
    /// Panics outside a tokio runtime, as `tokio::spawn`.
    ///
    /// The task opens `StreamCoreMetrics`, feeds each report to the
    /// endpoint, and re-opens the stream when it ends or fails; it stops
    /// for good when the server answers `Unimplemented` (it serves no
    /// `OpenRcaService`), as grpc-go does, and when the returned watcher
    /// is dropped.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    ///
    /// use tonic::transport::Endpoint;
    /// use tonic_hotpath::orca::client::EndpointWeights;
    ///
    /// let group = EndpointWeights::default();
    /// let endpoint = group.endpoint();
    /// let channel = Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
    /// let watcher = endpoint
    ///     .out_of_band()
    ///     .report_interval(Duration::from_secs(1))
    ///     .spawn(channel.clone());
    /// // ... balance over endpoint.load(channel) ...
    /// drop(watcher); // the stream ends
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn<T>(self, channel: T) -> OobWatcher
    where
        T: GrpcService<tonic::body::Body> + Send + 'static,
        T::Error: Into<StdError>,
        T::ResponseBody: Body<Data = Bytes> + Send + 'static,
        <T::ResponseBody as Body>::Error: Into<StdError> + Send,
        T::Future: Send,
    {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(run(
            OpenRcaServiceClient::new(channel),
            self.clone(),
            Arc::clone(&shared),
        ));
        OobWatcher {
            endpoint: self.endpoint,
            task,
            shared,
        }
    }

    /// The delay before attempt `attempt + 1` (grpc-go's
    /// `backoff.Exponential`).
    fn delay(&self, attempt: u32) -> Duration {
        let mut delay = self.base_delay.as_secs_f64();
        let max = self.max_delay.as_secs_f64();
        let mut left = attempt;
        while delay < max && left > 0 {
            delay *= 1.6;
            left -= 1;
        }
        let delay = delay.min(max);
        // A uniform value in [-1, 1) from std's randomly keyed hasher.
        let random = std::collections::hash_map::RandomState::new().hash_one(attempt);
        let unit = (random >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        Duration::from_secs_f64((delay * (1.0 + 0.2 * unit)).max(0.0))
    }
}

#[derive(Debug, Default)]
struct Shared {
    streams: AtomicU64,
    unimplemented: AtomicBool,
}

/// An endpoint's out-of-band report stream, running in a task
/// ([`OobWatcherBuilder::spawn`]); dropping it stops the task and ends the
/// stream.
pub struct OobWatcher {
    endpoint: EndpointWeight,
    task: JoinHandle<()>,
    shared: Arc<Shared>,
}

impl OobWatcher {
    /// The endpoint it feeds.
    pub fn endpoint(&self) -> &EndpointWeight {
        &self.endpoint
    }

    /// Streams opened so far (the first, and each re-open).
    pub fn streams(&self) -> u64 {
        self.shared.streams.load(Ordering::Relaxed)
    }

    /// Whether the server answered `Unimplemented`: the watcher stopped
    /// for good (grpc-go: "Server doesn't support ORCA OOB load reporting
    /// protocol; not listening for load reports").
    pub fn is_unimplemented(&self) -> bool {
        self.shared.unimplemented.load(Ordering::Acquire)
    }

    /// Whether the task has ended (after `Unimplemented`).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for OobWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for OobWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OobWatcher")
            .field("endpoint", &self.endpoint)
            .field("streams", &self.streams())
            .field("unimplemented", &self.is_unimplemented())
            .finish()
    }
}

/// grpc-go's `producer.run`: streams until `Unimplemented`, resetting the
/// backoff after a stream that delivered a report.
async fn run<T>(
    mut client: OpenRcaServiceClient<T>,
    options: OobWatcherBuilder,
    shared: Arc<Shared>,
) where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let interval =
        prost_types::Duration::try_from(options.report_interval).unwrap_or(prost_types::Duration {
            seconds: i64::MAX,
            nanos: 0,
        });
    let mut attempt = 0;
    loop {
        shared.streams.fetch_add(1, Ordering::Relaxed);
        let (reported, status) = stream(&mut client, interval, &options.endpoint).await;
        if status.code() == Code::Unimplemented {
            shared.unimplemented.store(true, Ordering::Release);
            return;
        }
        if reported {
            attempt = 0;
            continue;
        }
        tokio::time::sleep(options.delay(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

/// grpc-go's `producer.runStream`: whether a report came, and how the
/// stream ended.
async fn stream<T>(
    client: &mut OpenRcaServiceClient<T>,
    interval: prost_types::Duration,
    endpoint: &EndpointWeight,
) -> (bool, Status)
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let request = OrcaLoadReportRequest {
        report_interval: Some(interval),
        request_cost_names: Vec::new(),
    };
    let mut stream = match client.stream_core_metrics(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return (false, status),
    };
    let mut reported = false;
    loop {
        match stream.message().await {
            Ok(Some(report)) => {
                reported = true;
                endpoint.on_load_report(&report);
            }
            // The server ended the stream (grpc-go: io.EOF, retried).
            Ok(None) => return (reported, Status::unknown("stream ended")),
            Err(status) => return (reported, status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orca::client::EndpointWeights;

    #[test]
    fn backoff_is_grpc_go_exponential() {
        let options = EndpointWeights::default().endpoint().out_of_band();
        for (attempt, expected) in [(0, 1.0), (1, 1.6), (2, 2.56), (20, 120.0), (1000, 120.0)] {
            for _ in 0..20 {
                let delay = options.delay(attempt).as_secs_f64();
                assert!(
                    delay >= expected * 0.8 - 1e-9 && delay <= expected * 1.2 + 1e-9,
                    "attempt {attempt}: {delay}"
                );
            }
        }
        let quick = options.backoff(Duration::from_millis(10), Duration::from_millis(50));
        assert!(quick.delay(10).as_secs_f64() <= 0.06);
    }
}
