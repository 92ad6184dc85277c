//! [`CallMetricsLayer`], its builder, and its service [`CallMetrics`].

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::{ReportConfig, ResponseBody, ResponseFuture, ServerMetrics};
use crate::orca::recorder::scope::CallScope;
use crate::orca::{ReportFormat, ServerMetricsProvider, ServerMetricsRecorder};
use crate::wire::content_type::is_grpc;

/// Per-call load reports on a tonic server, as grpc-go's
/// `orca.CallMetricsServerOption`: a handler takes its call's recorder
/// with [`CallMetricsRecorder::current`](crate::orca::CallMetricsRecorder::current),
/// and what it records is sent in the call's `endpoint-load-metrics-bin`
/// trailer (unary and streaming calls, trailers-only answers in their
/// headers), over the process's values when the layer has them.
///
/// A call whose handler never takes its recorder costs no allocation and
/// gets no trailer (as in grpc-go). Requests that are not gRPC
/// (`content-type` `application/grpc`, `application/grpc+…`) pass
/// through untouched and their handlers find no recorder: they have no
/// trailers to carry a report. grpc-web calls get reports when tonic-web's
/// `GrpcWebLayer` sits outside this layer (it turns them into gRPC on the
/// way in and the trailers into its trailer frame on the way out); below
/// it, they pass through as any other non-gRPC request.
///
/// ```
/// use tonic::transport::Server;
/// use tonic_hotpath::orca::ServerMetricsRecorder;
/// use tonic_hotpath::orca::server::CallMetricsLayer;
///
/// let process = ServerMetricsRecorder::new();
/// process.set_qps(800.0);
/// let layer = CallMetricsLayer::builder().server_metrics(process.clone()).build();
/// let router = Server::builder()
///     .layer(layer)
///     .add_routes(tonic::service::Routes::default());
/// # let _ = router;
/// ```
#[derive(Clone, Debug)]
pub struct CallMetricsLayer {
    config: ReportConfig,
}

impl CallMetricsLayer {
    /// Reports each call's own values only (grpc-go's
    /// `CallMetricsServerOption(nil)`), in gRPC's binary trailer.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for the process's values and the report's form.
    pub fn builder() -> CallMetricsLayerBuilder {
        CallMetricsLayerBuilder {
            config: ReportConfig {
                server_metrics: None,
                format: ReportFormat::GrpcBinary,
            },
        }
    }
}

impl Default for CallMetricsLayer {
    fn default() -> Self {
        Self::new()
    }
}

/// Builds a [`CallMetricsLayer`].
#[derive(Clone, Debug)]
pub struct CallMetricsLayerBuilder {
    config: ReportConfig,
}

impl CallMetricsLayerBuilder {
    /// Each report starts from the process's values in `recorder`, which
    /// the call's own values override (grpc-go's
    /// `CallMetricsServerOption(smp)`); read without a copy or a lock.
    pub fn server_metrics(mut self, recorder: ServerMetricsRecorder) -> Self {
        self.config.server_metrics = Some(ServerMetrics::Recorder(recorder));
        self
    }

    /// As [`server_metrics`](Self::server_metrics), from any provider (its
    /// `server_metrics` is called once per reported call).
    pub fn server_metrics_provider(mut self, provider: impl ServerMetricsProvider) -> Self {
        self.config.server_metrics = Some(ServerMetrics::Provider(Arc::new(provider)));
        self
    }

    /// The header the report is written into: gRPC's binary trailer by
    /// default, or one of Envoy's `endpoint-load-metrics` forms.
    pub fn format(mut self, format: ReportFormat) -> Self {
        self.config.format = format;
        self
    }

    /// The layer.
    pub fn build(self) -> CallMetricsLayer {
        CallMetricsLayer {
            config: self.config,
        }
    }
}

impl<S> Layer<S> for CallMetricsLayer {
    type Service = CallMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallMetrics {
            inner,
            config: Arc::new(self.config.clone()),
        }
    }
}

/// The service of [`CallMetricsLayer`].
#[derive(Debug)]
pub struct CallMetrics<S> {
    inner: S,
    config: Arc<ReportConfig>,
}

// tonic clones the layered service per connection and per request: a
// clone shares the config (a copy would allocate per call).
impl<S: Clone> Clone for CallMetrics<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for CallMetrics<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // Only gRPC has trailers to carry a report: anything else (axum
        // routes, probes, grpc-web not yet translated by a tonic-web layer
        // below) passes through, and its handler finds no recorder.
        if !is_grpc(request.headers(), false) {
            return ResponseFuture::passthrough(self.inner.call(request));
        }
        let mut scope = CallScope::default();
        let inner = scope.enter(|| self.inner.call(request));
        ResponseFuture::new(inner, scope, Arc::clone(&self.config))
    }
}
