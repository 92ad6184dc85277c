//! gRPC's OpenTelemetry handlers on the stacks servers run (issue #18),
//! over real tonic servers and clients on 127.0.0.1: axum routes beside
//! gRPC record nothing (item 1); with gzip both ways, A66's
//! `*_compressed_message_size` histograms add up the sizes on the wire and
//! A72's message events carry `message-size` (uncompressed) and
//! `message-size-compressed`, as grpc-go's do (item 3).

use support::otel_harness;
use support::stacks;

use opentelemetry::Value;
use opentelemetry_sdk::trace::SpanData;
use otel_harness::{attribute, provider, span, wait_for_spans};
use prost::Message;
use stacks::compress::{compressing_client, compressing_routes, message_of_size};
use support::otel::{Sdk, histogram};
use support::{EchoRequest, EchoService};
use tonic::codec::CompressionEncoding;
use tonic::transport::Server;
use tonic_hotpath::otel::{GrpcTraceBinPropagator, OtelTracing};
use tonic_hotpath::stats::CombinedLayer;
use tonic_hotpath::stats::compression::Encoding;
use tower::ServiceBuilder;

const METHOD: &str = "hotpath.echo.Echo/UnaryEcho";

/// The (name, message-size, message-size-compressed) of each message
/// event of `span`.
fn sizes(span: &SpanData) -> Vec<(String, i64, Option<i64>)> {
    let number = |attributes: &[opentelemetry::KeyValue], key| match attribute(attributes, key) {
        Some(Value::I64(n)) => Some(n),
        None => None,
        other => panic!("{key}: {other:?}"),
    };
    span.events
        .iter()
        .map(|event| {
            (
                event.name.to_string(),
                number(&event.attributes, "message-size").expect("message-size"),
                number(&event.attributes, "message-size-compressed"),
            )
        })
        .collect()
}

#[tokio::test]
async fn otel_handlers_measure_compressed_messages_both_ways() {
    let sdk = Sdk::new();
    let (tracers, spans) = provider();
    let metrics = || {
        sdk.metrics()
            .with_method(format!("/{METHOD}"))
            .build()
            .unwrap()
    };
    let tracing = || OtelTracing::new(&tracers, GrpcTraceBinPropagator::new());

    let (addr, incoming) = support::bind().await;
    let server = CombinedLayer::server().with(metrics()).with(tracing());
    stacks::serve(
        Server::builder(),
        server.clone(),
        compressing_routes(EchoService),
        server.incoming(incoming),
    );
    let layered = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(metrics()).with(tracing()))
        .service(support::connect(addr).await);
    let mut client = compressing_client(layered, CompressionEncoding::Gzip);
    let message = message_of_size(64 * 1024);
    client
        .unary_echo(EchoRequest {
            message: message.clone(),
        })
        .await
        .unwrap();

    let encoded = EchoRequest { message }.encode_to_vec();
    let length = encoded.len() as i64;
    let compressed = support::compression::compress(Encoding::Gzip, &encoded).len() as i64;
    assert!(compressed < length / 10, "{compressed} of {length}");

    // A72: both directions, both sides.
    let names: Vec<String> = ["Attempt", "Recv"]
        .iter()
        .map(|prefix| format!("{prefix}.{}", METHOD.replace('/', ".")))
        .collect();
    let exported = wait_for_spans(&spans, &names).await;
    let both = |first: &str, second: &str| {
        vec![
            (first.to_owned(), length, Some(compressed)),
            (second.to_owned(), length, Some(compressed)),
        ]
    };
    assert_eq!(
        sizes(span(&exported, &names[0])),
        both("Outbound message", "Inbound message")
    );
    assert_eq!(
        sizes(span(&exported, &names[1])),
        both("Inbound message", "Outbound message")
    );

    // A66: the sizes on the wire.
    let ok = [("grpc.method", METHOD), ("grpc.status", "OK")];
    for side in ["server.call", "client.attempt"] {
        for direction in ["sent", "rcvd"] {
            let name = format!("grpc.{side}.{direction}_total_compressed_message_size");
            let attrs: Vec<(&str, &str)> = if side == "server.call" {
                ok.to_vec()
            } else {
                [ok.as_slice(), &[("grpc.target", "other")]].concat()
            };
            let (count, sum, _) = histogram(sdk.point(&name, &attrs));
            assert_eq!((count, sum), (1, compressed as f64), "{name}");
        }
    }
}

/// Item 1: plain HTTP requests to axum routes on the same server record no
/// A66 metric at all (they used to be `grpc.method="other"`,
/// `grpc.status="CANCELLED"`); the gRPC call beside them is recorded.
#[tokio::test]
async fn otel_metrics_ignore_axum_routes_beside_grpc() {
    use stacks::plain_http::{get_request, http1, http2, spawn_grpc_and_axum};
    let sdk = Sdk::new();
    let metrics = sdk
        .metrics()
        .with_method(format!("/{METHOD}"))
        .build()
        .unwrap();
    let (addr, incoming) = support::bind().await;
    let layer = CombinedLayer::server().with(metrics);
    spawn_grpc_and_axum(layer.clone(), EchoService, layer.incoming(incoming));
    for reply in [
        http1(addr, get_request("/healthz")).await,
        http2(addr, get_request("/healthz")).await,
    ] {
        assert_eq!(reply.status.as_u16(), 200);
    }
    assert!(sdk.counts("grpc.server.call.started").is_empty());
    assert!(sdk.counts("grpc.server.call.duration").is_empty());
    let mut grpc = support::EchoClient::new(support::connect(addr).await);
    grpc.unary_echo(EchoRequest::default()).await.unwrap();
    support::wait_until("the call's duration", || {
        !sdk.counts("grpc.server.call.duration").is_empty()
    })
    .await;
    let started = sdk.counts("grpc.server.call.started");
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0].1, 1);
}
