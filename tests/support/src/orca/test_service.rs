//! gRPC's interop `TestService`, as grpc-go's `interop/test_utils.go`
//! `testServer` answers it, on tonic with the `orca` server side: the
//! per-call report of `UnaryCall` (`orca_per_query_report`, into
//! [`CallMetricsRecorder::current`]), the out-of-band values of
//! `FullDuplexCall` (`orca_oob_report`, into the server's
//! [`ServerMetricsRecorder`]), and `SimpleResponse.server_id` for the
//! balancing tests. [`serve`] starts one on 127.0.0.1, as grpc-go's
//! `interop/server` does: `CallMetricsLayer` and `OpenRcaService` (at a
//! 1 s minimum reporting interval) over one recorder.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedMutexGuard, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};
use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{CallMetricsRecorder, OrcaService, ServerMetricsRecorder};

use super::grpc_testing::test_service_server::{TestService, TestServiceServer};
use super::grpc_testing::{
    Empty, Payload, PayloadType, SimpleRequest, SimpleResponse, StreamingInputCallRequest,
    StreamingInputCallResponse, StreamingOutputCallRequest, StreamingOutputCallResponse,
    TestOrcaReport,
};

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send + 'static>>;

/// The interop test service (grpc-go's `testServer`).
#[derive(Clone)]
pub struct InteropTestService {
    /// Put in `SimpleResponse.server_id` when the request asks
    /// (`fill_server_id`).
    server_id: String,
    /// Where `FullDuplexCall` puts `orca_oob_report` (grpc-go's
    /// `metricsRecorder`); `None`: the OOB values are ignored.
    recorder: Option<ServerMetricsRecorder>,
    /// Held by a `FullDuplexCall` from its first OOB report to its end
    /// (grpc-go's `orcaMu`): one stream's values at a time.
    oob_lock: Arc<Mutex<()>>,
}

impl InteropTestService {
    pub fn new(server_id: impl Into<String>, recorder: Option<ServerMetricsRecorder>) -> Self {
        Self {
            server_id: server_id.into(),
            recorder,
            oob_lock: Arc::new(Mutex::new(())),
        }
    }
}

/// grpc-go's `serverNewPayload`: `size` zero bytes, COMPRESSABLE only.
fn new_payload(kind: i32, size: i32) -> Result<Payload, Status> {
    if size < 0 {
        return Err(Status::unknown(format!(
            "requested a response with invalid length {size}"
        )));
    }
    if kind != PayloadType::Compressable as i32 {
        return Err(Status::unknown(format!("unsupported payload type: {kind}")));
    }
    Ok(Payload {
        r#type: kind,
        body: vec![0; usize::try_from(size).expect("not negative")],
    })
}

/// grpc-go's `setORCAMetrics` for a server (process-wide) recorder: CPU,
/// memory and each named utilization (request costs are per call only).
fn set_server_metrics(recorder: &ServerMetricsRecorder, report: &TestOrcaReport) {
    recorder.set_cpu_utilization(report.cpu_utilization);
    recorder.set_memory_utilization(report.memory_utilization);
    for (name, value) in &report.utilization {
        recorder.set_named_utilization(name, *value);
    }
}

/// grpc-go's `setORCAMetrics` for a call's recorder: CPU, memory, each
/// request cost and each named utilization.
fn set_call_metrics(recorder: &CallMetricsRecorder, report: &TestOrcaReport) {
    recorder.set_cpu_utilization(report.cpu_utilization);
    recorder.set_memory_utilization(report.memory_utilization);
    for (name, value) in &report.request_cost {
        recorder.set_request_cost(name, *value);
    }
    for (name, value) in &report.utilization {
        recorder.set_named_utilization(name, *value);
    }
}

/// A `grpc-status` from the request's `EchoStatus`, when it asks for one.
fn echo_status(status: Option<&super::grpc_testing::EchoStatus>) -> Result<(), Status> {
    match status {
        Some(status) if status.code != 0 => Err(Status::new(
            tonic::Code::from(status.code),
            status.message.clone(),
        )),
        _ => Ok(()),
    }
}

#[tonic::async_trait]
impl TestService for InteropTestService {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Ok(Response::new(Empty {}))
    }

    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        let request = request.into_inner();
        echo_status(request.response_status.as_ref())?;
        let payload = new_payload(request.response_type, request.response_size)?;
        // As grpc-go: the call's recorder is taken on every call (so a
        // report goes out with the server's values, if the layer has any),
        // and filled from the request when it carries a report.
        if let Some(recorder) = CallMetricsRecorder::current()
            && let Some(report) = &request.orca_per_query_report
        {
            set_call_metrics(&recorder, report);
        }
        Ok(Response::new(SimpleResponse {
            payload: Some(payload),
            server_id: if request.fill_server_id {
                self.server_id.clone()
            } else {
                String::new()
            },
            ..SimpleResponse::default()
        }))
    }

    async fn cacheable_unary_call(
        &self,
        _: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        Err(Status::unimplemented("not implemented by this test server"))
    }

    type StreamingOutputCallStream = ResponseStream;

    async fn streaming_output_call(
        &self,
        _: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<Self::StreamingOutputCallStream>, Status> {
        Err(Status::unimplemented("not implemented by this test server"))
    }

    async fn streaming_input_call(
        &self,
        _: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        Err(Status::unimplemented("not implemented by this test server"))
    }

    type FullDuplexCallStream = ResponseStream;

    async fn full_duplex_call(
        &self,
        request: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<Self::FullDuplexCallStream>, Status> {
        let mut incoming = request.into_inner();
        let (sender, receiver) = mpsc::channel(16);
        let recorder = self.recorder.clone();
        let oob_lock = Arc::clone(&self.oob_lock);
        tokio::spawn(async move {
            // grpc-go's hasORCALock: taken at the first OOB report, held
            // until the stream ends (dropped with this task).
            let mut oob_guard: Option<OwnedMutexGuard<()>> = None;
            while let Some(message) = incoming.next().await {
                let answer = async {
                    let message = message?;
                    echo_status(message.response_status.as_ref())?;
                    if let (Some(recorder), Some(report)) = (&recorder, &message.orca_oob_report) {
                        if oob_guard.is_none() {
                            oob_guard = Some(Arc::clone(&oob_lock).lock_owned().await);
                        }
                        set_server_metrics(recorder, report);
                    }
                    let mut responses = Vec::new();
                    for parameters in &message.response_parameters {
                        if parameters.interval_us > 0 {
                            let micros = u64::try_from(parameters.interval_us).expect("positive");
                            tokio::time::sleep(Duration::from_micros(micros)).await;
                        }
                        responses.push(StreamingOutputCallResponse {
                            payload: Some(new_payload(message.response_type, parameters.size)?),
                            ..StreamingOutputCallResponse::default()
                        });
                    }
                    Ok::<_, Status>(responses)
                }
                .await;
                match answer {
                    Ok(responses) => {
                        for response in responses {
                            if sender.send(Ok(response)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(status) => {
                        let _ = sender.send(Err(status)).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    type HalfDuplexCallStream = ResponseStream;

    async fn half_duplex_call(
        &self,
        _: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<Self::HalfDuplexCallStream>, Status> {
        Err(Status::unimplemented("not implemented by this test server"))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not implemented by this test server"))
    }
}

/// How [`serve`] sets a server up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orca {
    /// As grpc-go's interop server: `CallMetricsLayer` without server
    /// metrics (a call's report holds only what its handler set) and
    /// `OpenRcaService` over the recorder.
    Interop,
    /// `CallMetricsLayer` with the recorder as its server metrics (each
    /// call's report carries the recorder's values) and `OpenRcaService`
    /// over it: what `weighted_round_robin` reads, per call or out of band.
    Reporting,
    /// No ORCA at all: no trailer, no `OpenRcaService`.
    Off,
}

/// One interop test server on 127.0.0.1 (an ephemeral port), answering
/// with `server_id`; returns its address and the recorder behind its
/// reports (the one its `FullDuplexCall` fills, with [`Orca::Interop`]).
/// It serves until the test's runtime ends.
pub async fn serve(server_id: &str, orca: Orca) -> (SocketAddr, ServerMetricsRecorder) {
    let recorder = ServerMetricsRecorder::new();
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("loopback address"))
        .expect("bind 127.0.0.1:0")
        .with_nodelay(Some(true));
    let addr = incoming.local_addr().expect("local addr");
    let service = TestServiceServer::new(InteropTestService::new(
        server_id,
        (orca != Orca::Off).then(|| recorder.clone()),
    ));
    let oob = || {
        OrcaService::builder(recorder.clone())
            .min_reporting_interval(Duration::from_secs(1))
            .build()
            .into_server()
    };
    match orca {
        Orca::Interop => {
            tokio::spawn(
                tonic::transport::Server::builder()
                    .layer(CallMetricsLayer::new())
                    .add_service(service)
                    .add_service(oob())
                    .serve_with_incoming(incoming),
            );
        }
        Orca::Reporting => {
            tokio::spawn(
                tonic::transport::Server::builder()
                    .layer(
                        CallMetricsLayer::builder()
                            .server_metrics(recorder.clone())
                            .build(),
                    )
                    .add_service(service)
                    .add_service(oob())
                    .serve_with_incoming(incoming),
            );
        }
        Orca::Off => {
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(incoming),
            );
        }
    }
    (addr, recorder)
}
