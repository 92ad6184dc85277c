//! The server side: `CallMetricsLayer` on a real tonic server, read by a
//! real tonic client over TCP: the report in unary and streaming trailers
//! and in trailers-only answers, no trailer for a call that never took its
//! recorder, the call's values over the process's, grpc-go's ranges, and
//! no allocation for a call that records nothing.

use std::pin::Pin;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::service::Routes;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{
    BackendMetrics, CallMetricsRecorder, OrcaLoadReport, ServerMetricsProvider,
    ServerMetricsRecorder, load_report_from,
};
use tower::{BoxError, Layer, Service};

use support::orca::grpc_testing::test_service_client::TestServiceClient;
use support::orca::grpc_testing::test_service_server::{TestService, TestServiceServer};
use support::orca::grpc_testing::{
    Empty, ResponseParameters, SimpleRequest, SimpleResponse, StreamingInputCallRequest,
    StreamingInputCallResponse, StreamingOutputCallRequest, StreamingOutputCallResponse,
};

/// What the test handler does, chosen by the `x-behaviour` header.
struct Recording;

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

fn behaviour<T>(request: &Request<T>) -> String {
    request
        .metadata()
        .get("x-behaviour")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("none")
        .to_owned()
}

#[tonic::async_trait]
impl TestService for Recording {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Ok(Response::new(Empty {}))
    }

    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        match behaviour(&request).as_str() {
            "none" => {}
            "take-only" => {
                CallMetricsRecorder::current().expect("the layer serves this call");
            }
            "record" => {
                let recorder = CallMetricsRecorder::current().expect("layer");
                recorder.set_cpu_utilization(0.9);
                recorder.set_request_cost("cost", 3456.32);
                recorder.set_named_metric("a", 1.0);
                recorder.set_named_metric("b", 2.0);
                recorder.set_named_utilization("util", 0.3);
                // Out of grpc-go's ranges: ignored.
                recorder.set_memory_utilization(1.5);
                recorder.set_named_utilization("too-much", 1.01);
                recorder.set_qps(-1.0);
                recorder.set_eps(f64::NAN);
            }
            "spawn" => {
                let recorder = CallMetricsRecorder::current().expect("layer");
                // The handle works from another task; `current` there has
                // no call.
                tokio::spawn(async move {
                    assert!(CallMetricsRecorder::current().is_none());
                    recorder.set_request_cost("spawned", 7.0);
                })
                .await
                .expect("spawned task");
            }
            "record-then-fail" => {
                let recorder = CallMetricsRecorder::current().expect("layer");
                recorder.set_request_cost("cost", 1.5);
                return Err(Status::resource_exhausted("busy"));
            }
            "fail" => return Err(Status::resource_exhausted("busy")),
            other => return Err(Status::invalid_argument(other.to_owned())),
        }
        Ok(Response::new(SimpleResponse::default()))
    }

    async fn cacheable_unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.unary_call(request).await
    }

    type StreamingOutputCallStream = ResponseStream;

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let count = request.get_ref().response_parameters.len();
        // Each item is made while the layer's body polls the stream: it
        // finds the call's recorder there.
        let items = tokio_stream::iter(0..count).map(|index| {
            let recorder = CallMetricsRecorder::current().expect("polled by the layer's body");
            recorder.set_request_cost(format!("item-{index}"), index as f64);
            Ok(StreamingOutputCallResponse::default())
        });
        Ok(Response::new(Box::pin(items)))
    }

    async fn streaming_input_call(
        &self,
        _: Request<tonic::Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        Err(Status::unimplemented("not here"))
    }

    type FullDuplexCallStream = ResponseStream;

    async fn full_duplex_call(
        &self,
        _: Request<tonic::Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        Err(Status::unimplemented("not here"))
    }

    type HalfDuplexCallStream = ResponseStream;

    async fn half_duplex_call(
        &self,
        _: Request<tonic::Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        Err(Status::unimplemented("not here"))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not here"))
    }
}

/// A server on 127.0.0.1 with `layer`; a client to it.
async fn serve(layer: CallMetricsLayer) -> TestServiceClient<Channel> {
    serve_with(layer).await
}

/// A server on 127.0.0.1 with `layer` (any stack tonic takes); a client
/// to it.
pub(crate) async fn serve_with<L, ResBody>(layer: L) -> TestServiceClient<Channel>
where
    L: Layer<Routes> + Clone + Send + 'static,
    L::Service:
        Service<http::Request<Body>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    <L::Service as Service<http::Request<Body>>>::Future: Send,
    <L::Service as Service<http::Request<Body>>>::Error: Into<BoxError> + Send,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(TestServiceServer::new(Recording))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    TestServiceClient::new(channel)
}

pub(crate) fn request<T>(message: T, behaviour: &'static str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("x-behaviour", behaviour.parse().unwrap());
    request
}

/// The report in a response's metadata (tonic merges a unary call's
/// trailers into it), read with grpc-go's rules.
fn report_in(metadata: &MetadataMap) -> Option<OrcaLoadReport> {
    load_report_from(&metadata.clone().into_headers()).expect("a well-formed report")
}

pub(crate) async fn unary(
    client: &mut TestServiceClient<Channel>,
    behaviour: &'static str,
) -> Option<OrcaLoadReport> {
    let response = client
        .unary_call(request(SimpleRequest::default(), behaviour))
        .await
        .expect("the call succeeds");
    report_in(response.metadata())
}

fn map(entries: &[(&str, f64)]) -> std::collections::BTreeMap<String, f64> {
    entries
        .iter()
        .map(|(name, value)| ((*name).to_owned(), *value))
        .collect()
}

#[tokio::test]
async fn unary_trailer_carries_what_the_handler_recorded_within_range() {
    let mut client = serve(CallMetricsLayer::new()).await;
    let report = unary(&mut client, "record").await.expect("a report");
    assert_eq!(
        report,
        OrcaLoadReport {
            cpu_utilization: 0.9,
            request_cost: map(&[("cost", 3456.32)]),
            named_metrics: map(&[("a", 1.0), ("b", 2.0)]),
            utilization: map(&[("util", 0.3)]),
            ..OrcaLoadReport::default()
        }
    );
}

#[tokio::test]
async fn a_call_that_never_takes_its_recorder_gets_no_trailer() {
    let process = ServerMetricsRecorder::new();
    process.set_cpu_utilization(0.5);
    let mut client = serve(CallMetricsLayer::builder().server_metrics(process).build()).await;
    assert_eq!(unary(&mut client, "none").await, None);
    let failed = client
        .unary_call(request(SimpleRequest::default(), "fail"))
        .await
        .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::ResourceExhausted);
    assert_eq!(report_in(failed.metadata()), None);
}

#[tokio::test]
async fn a_taken_recorder_sends_a_report_even_when_empty() {
    // grpc-go sends the trailer once the handler took the recorder.
    let mut client = serve(CallMetricsLayer::new()).await;
    assert_eq!(
        unary(&mut client, "take-only").await,
        Some(OrcaLoadReport::default())
    );
}

#[tokio::test]
async fn the_calls_values_win_over_the_processs() {
    let process = ServerMetricsRecorder::new();
    process.set_cpu_utilization(0.5);
    process.set_memory_utilization(0.25);
    process.set_qps(100.0);
    process.set_named_utilization("util", 0.1);
    process.set_named_utilization("disk", 0.6);
    let mut client = serve(
        CallMetricsLayer::builder()
            .server_metrics(process.clone())
            .build(),
    )
    .await;
    let report = unary(&mut client, "record").await.expect("a report");
    assert_eq!(report.cpu_utilization, 0.9, "the call's value");
    assert_eq!(
        report.mem_utilization, 0.25,
        "the process's (the call's was out of range)"
    );
    assert_eq!(
        report.rps_fractional, 100.0,
        "the process's (the call's was out of range)"
    );
    assert_eq!(report.utilization, map(&[("disk", 0.6), ("util", 0.3)]));
    assert_eq!(report.request_cost, map(&[("cost", 3456.32)]));

    // A later change of the process's values shows in the next report;
    // a taken-only recorder sends the process's values.
    process.set_qps(250.0);
    process.delete_memory_utilization();
    let report = unary(&mut client, "take-only").await.expect("a report");
    assert_eq!(report.rps_fractional, 250.0);
    assert_eq!(report.mem_utilization, 0.0);
    assert_eq!(report.cpu_utilization, 0.5);
}

/// A provider that is not the crate's recorder.
struct Fixed;

impl ServerMetricsProvider for Fixed {
    fn server_metrics(&self) -> BackendMetrics {
        let mut metrics = BackendMetrics::default();
        metrics.application_utilization = Some(0.75);
        metrics.eps = Some(3.0);
        metrics
    }
}

#[tokio::test]
async fn any_provider_gives_the_processs_values() {
    let layer = CallMetricsLayer::builder()
        .server_metrics_provider(Fixed)
        .build();
    let mut client = serve(layer).await;
    let report = unary(&mut client, "spawn").await.expect("a report");
    assert_eq!(
        report,
        OrcaLoadReport {
            application_utilization: 0.75,
            eps: 3.0,
            request_cost: map(&[("spawned", 7.0)]),
            ..OrcaLoadReport::default()
        }
    );
}

#[tokio::test]
async fn trailers_only_answers_carry_the_report_in_their_headers() {
    let mut client = serve(CallMetricsLayer::new()).await;
    let failed = client
        .unary_call(request(SimpleRequest::default(), "record-then-fail"))
        .await
        .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::ResourceExhausted);
    assert_eq!(
        report_in(failed.metadata()),
        Some(OrcaLoadReport {
            request_cost: map(&[("cost", 1.5)]),
            ..OrcaLoadReport::default()
        })
    );
}

#[tokio::test]
async fn streaming_trailers_carry_what_the_stream_recorded() {
    let mut client = serve(CallMetricsLayer::new()).await;
    let message = StreamingOutputCallRequest {
        response_parameters: vec![ResponseParameters::default(); 3],
        ..StreamingOutputCallRequest::default()
    };
    let mut stream = client
        .streaming_output_call(request(message, "stream"))
        .await
        .unwrap()
        .into_inner();
    let mut received = 0;
    while stream.message().await.unwrap().is_some() {
        received += 1;
    }
    assert_eq!(received, 3);
    let trailers = stream.trailers().await.unwrap().expect("trailers");
    assert_eq!(
        report_in(&trailers).expect("a report").request_cost,
        map(&[("item-0", 0.0), ("item-1", 1.0), ("item-2", 2.0)])
    );
}

#[tokio::test]
async fn envoys_forms_carry_the_report_in_endpoint_load_metrics() {
    use tonic_hotpath::orca::{ReportFormat, parse_endpoint_load_metrics};
    let process = ServerMetricsRecorder::new();
    process.set_qps(100.0);
    for (format, prefix) in [
        (ReportFormat::EnvoyBinary, "BIN "),
        (ReportFormat::EnvoyText, "TEXT "),
        (ReportFormat::EnvoyJson, "JSON "),
    ] {
        let layer = CallMetricsLayer::builder()
            .server_metrics(process.clone())
            .format(format)
            .build();
        let mut client = serve(layer).await;
        let response = client
            .unary_call(request(SimpleRequest::default(), "record"))
            .await
            .expect("the call succeeds");
        let trailers = response.metadata().clone().into_headers();
        assert!(
            trailers.get("endpoint-load-metrics-bin").is_none(),
            "{format:?}"
        );
        let value = trailers
            .get(ReportFormat::ENVOY_HEADER)
            .expect("Envoy's header");
        assert!(value.to_str().unwrap().starts_with(prefix), "{value:?}");
        let report = parse_endpoint_load_metrics(value).expect("Envoy's parser reads it");
        assert_eq!(report.cpu_utilization, 0.9, "{format:?}");
        assert_eq!(report.rps_fractional, 100.0, "{format:?}");
        assert_eq!(
            report.named_metrics,
            map(&[("a", 1.0), ("b", 2.0)]),
            "{format:?}"
        );
        // TEXT has no key for request costs and named utilizations
        // (Envoy's parser): the binary and JSON forms carry them.
        if format != ReportFormat::EnvoyText {
            assert_eq!(report.request_cost, map(&[("cost", 3456.32)]), "{format:?}");
            assert_eq!(report.utilization, map(&[("util", 0.3)]), "{format:?}");
        }
    }
}
