//! gRPC's OpenTelemetry metrics (gRFC A66) on a tonic server and client,
//! exported for Prometheus to scrape.
//!
//! The server (gRPC's health service from `tonic-health`) and the client
//! each carry an `OtelMetrics` handler on a `CombinedLayer`; both record
//! into one OpenTelemetry SDK meter provider whose reader is the
//! OpenTelemetry project's Prometheus exporter (`opentelemetry-prometheus`
//! on the `prometheus` crate's registry). A small HTTP/1 endpoint serves
//! the registry in Prometheus' text format at `/metrics`, as a deployed
//! service would. The client makes some calls (every fifth asks for a
//! service the server does not know: `NOT_FOUND`), then the process keeps
//! serving the scrape endpoint for a while.
//!
//! Environment:
//! - `OTEL_EXAMPLE_METRICS_ADDR`: the scrape endpoint (default `127.0.0.1:9464`);
//! - `OTEL_EXAMPLE_CALLS`: how many calls the client makes (default 10);
//! - `OTEL_EXAMPLE_LINGER_SECS`: how long to keep serving afterwards
//!   (default 0).
//!
//! `OTEL_EXAMPLE_LINGER_SECS=60 cargo run --features otel --example otel`,
//! then `curl http://127.0.0.1:9464/metrics`; `tools/otel-prometheus-check`
//! scrapes it with a real Prometheus server.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder, Registry, TextEncoder};
use tonic::Code;
use tonic::transport::{Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::SERVICE_NAME;
use tonic_hotpath::otel::OtelMetrics;
use tonic_hotpath::stats::CombinedLayer;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// An environment variable parsed as `T`, or `default` when unset.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T, Error>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .map_err(|e| format!("{name}={text}: {e}").into()),
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => Err(format!("{name}: {e}").into()),
    }
}

/// Serves `registry` in Prometheus' text format on `GET /metrics`.
async fn serve_metrics(listener: tokio::net::TcpListener, registry: Registry) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let registry = registry.clone();
            async move {
                if request.uri().path() == "/metrics" {
                    let encoder = TextEncoder::new();
                    let mut text = Vec::new();
                    match encoder.encode(&registry.gather(), &mut text) {
                        Ok(()) => http::Response::builder()
                            .header(http::header::CONTENT_TYPE, encoder.format_type())
                            .body(Full::new(Bytes::from(text))),
                        Err(e) => http::Response::builder()
                            .status(http::StatusCode::INTERNAL_SERVER_ERROR)
                            .body(Full::new(Bytes::from(e.to_string()))),
                    }
                } else {
                    http::Response::builder()
                        .status(http::StatusCode::NOT_FOUND)
                        .body(Full::new(Bytes::from_static(b"try /metrics\n")))
                }
            }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                eprintln!("metrics connection: {e}");
            }
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let metrics_addr: SocketAddr =
        env_or("OTEL_EXAMPLE_METRICS_ADDR", ([127, 0, 0, 1], 9464).into())?;
    let calls: u32 = env_or("OTEL_EXAMPLE_CALLS", 10)?;
    let linger = Duration::from_secs(env_or("OTEL_EXAMPLE_LINGER_SECS", 0)?);

    // The SDK's meter provider, read by the Prometheus exporter.
    let registry = Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()?;
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();

    let metrics_listener = tokio::net::TcpListener::bind(metrics_addr).await?;
    println!("metrics: http://{}/metrics", metrics_listener.local_addr()?);
    tokio::spawn(serve_metrics(metrics_listener, registry));

    // Server: the health service, its methods recorded by name.
    let server_metrics = OtelMetrics::builder(&provider)
        .with_service(SERVICE_NAME)
        .build()?;
    let layer = CombinedLayer::server().with(server_metrics);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("demo.Greeter", tonic_health::ServingStatus::Serving)
        .await;
    tokio::spawn(
        Server::builder()
            .layer(layer.clone())
            .add_service(health)
            .serve_with_incoming(layer.incoming_tcp(listener)),
    );

    // Client: the same registration; `grpc.target` is the URI it dials.
    let target = format!("http://{addr}");
    let client_metrics = OtelMetrics::builder(&provider)
        .with_service(SERVICE_NAME)
        .with_target(target.as_str())
        .build()?;
    let channel = Endpoint::from_shared(target)?.connect().await?;
    let layered = tower::ServiceBuilder::new()
        .layer(CombinedLayer::client().with(client_metrics))
        .service(channel);
    let mut client = HealthClient::new(layered);

    let (mut ok, mut not_found) = (0, 0);
    for call in 0..calls {
        let service = if call % 5 == 4 {
            "demo.Missing"
        } else {
            "demo.Greeter"
        };
        let request = HealthCheckRequest {
            service: service.to_owned(),
        };
        match client.check(request).await {
            Ok(_) => ok += 1,
            Err(status) if status.code() == Code::NotFound => not_found += 1,
            Err(status) => return Err(status.into()),
        }
    }
    println!("calls: {calls} ({ok} OK, {not_found} NOT_FOUND)");

    if !linger.is_zero() {
        println!("serving metrics for {linger:?}");
        tokio::time::sleep(linger).await;
    }
    provider.shutdown()?;
    Ok(())
}
