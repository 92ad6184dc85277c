//! gRFC A66 metrics from `OtelMetrics` on a real tonic server and client
//! over 127.0.0.1, read back from the OpenTelemetry SDK's in-memory
//! exporter: names, units, attributes, bucket boundaries and values.

use std::time::Duration;

use support::otel::{LATENCY, Point, SIZES, Sdk, attrs_of, histogram};
use support::{
    EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService, ResponseStream,
    wait_until,
};
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::otel::{OtelMetrics, OtelMetricsBuilder, OtelMetricsError};
use tonic_hotpath::stats::{CombinedLayer, CombinedService};

const SERVICE: &str = "hotpath.echo.Echo";
const UNARY: &str = "hotpath.echo.Echo/UnaryEcho";

// ---- a server and a client with metrics ----

/// Serves `service` with `server` metrics on 127.0.0.1 and returns a
/// client with `client` metrics and the target it was built for.
async fn pair<S>(
    service: EchoServer<S>,
    server: OtelMetrics,
    client: OtelMetricsBuilder,
) -> (
    EchoClient<CombinedService<Channel, OtelMetrics, tonic_hotpath::stats::ClientSide>>,
    String,
)
where
    S: support::Echo,
{
    let layer = CombinedLayer::server().with(server);
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    let target = format!("http://{addr}");
    let client = client
        .with_target(target.as_str())
        .build()
        .expect("client metrics");
    let channel = support::connect(addr).await;
    let layered = tower::ServiceBuilder::new()
        .layer(CombinedLayer::client().with(client))
        .service(channel);
    (EchoClient::new(layered), target)
}

/// [`pair`] with the echo service registered on both sides, recording
/// into a new [`Sdk`].
async fn registered_pair<S: support::Echo>(
    service: S,
) -> (
    Sdk,
    EchoClient<CombinedService<Channel, OtelMetrics, tonic_hotpath::stats::ClientSide>>,
    String,
) {
    let sdk = Sdk::new();
    let server = sdk.metrics().with_service(SERVICE).build().unwrap();
    let client = sdk.metrics().with_service(SERVICE);
    let (client, target) = pair(EchoServer::new(service), server, client).await;
    (sdk, client, target)
}

/// Every message of a streaming response (which must succeed).
async fn replies(
    response: Result<Response<tonic::Streaming<EchoResponse>>, Status>,
) -> Vec<EchoResponse> {
    let stream = response.expect("streaming call").into_inner();
    stream
        .collect::<Result<_, _>>()
        .await
        .expect("every message")
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// The encoded length of a message with one text field: no gRPC prefix.
fn len_of(message: &str) -> f64 {
    (2 + message.len()) as f64
}

/// Waits until the server and client recorded `n` call durations.
async fn wait_for_ends(sdk: &Sdk, n: u64) {
    wait_until("every RPC ended on both sides", || {
        let export = sdk.export();
        let count = |name: &str| -> u64 {
            export.get(name).map_or(0, |e| {
                e.points
                    .values()
                    .map(|p| match p {
                        Point::Histogram { count, .. } => *count,
                        Point::Counter(_) | Point::Gauge(_) | Point::Total(_) => 0,
                    })
                    .sum()
            })
        };
        count("grpc.server.call.duration") == n && count("grpc.client.call.duration") == n
    })
    .await;
}

#[tokio::test]
async fn otel_unary_ok_names_units_attributes_buckets_and_values() {
    let (sdk, mut client, target) = registered_pair(EchoService).await;
    for _ in 0..3 {
        client.unary_echo(request("hello")).await.unwrap();
    }
    wait_for_ends(&sdk, 3).await;
    let export = sdk.export();

    let expected = [
        ("grpc.server.call.started", "{call}"),
        ("grpc.server.call.duration", "s"),
        ("grpc.server.call.sent_total_compressed_message_size", "By"),
        ("grpc.server.call.rcvd_total_compressed_message_size", "By"),
        ("grpc.client.attempt.started", "{attempt}"),
        ("grpc.client.attempt.duration", "s"),
        (
            "grpc.client.attempt.sent_total_compressed_message_size",
            "By",
        ),
        (
            "grpc.client.attempt.rcvd_total_compressed_message_size",
            "By",
        ),
        ("grpc.client.call.duration", "s"),
    ];
    assert_eq!(
        export.keys().collect::<Vec<_>>(),
        {
            let mut names: Vec<_> = expected.iter().map(|(n, _)| n).collect();
            names.sort();
            names
        },
        "exactly A66's nine instruments"
    );
    for (name, unit) in expected {
        let e = &export[name];
        assert_eq!(e.unit, unit, "{name}");
        assert!(!e.description.is_empty(), "{name} has a description");
        assert_eq!(
            e.scope,
            (
                "tonic-hotpath".to_owned(),
                Some(env!("CARGO_PKG_VERSION").to_owned())
            ),
            "{name}'s meter"
        );
        assert_eq!(e.points.len(), 1, "{name}: one attribute set");
    }

    let server_started = [("grpc.method", UNARY)];
    let server_ended = [("grpc.method", UNARY), ("grpc.status", "OK")];
    let client_started = [("grpc.method", UNARY), ("grpc.target", target.as_str())];
    let client_ended = [
        ("grpc.method", UNARY),
        ("grpc.status", "OK"),
        ("grpc.target", target.as_str()),
    ];
    assert_eq!(
        sdk.point("grpc.server.call.started", &server_started),
        Some(Point::Counter(3))
    );
    assert_eq!(
        sdk.point("grpc.client.attempt.started", &client_started),
        Some(Point::Counter(3))
    );
    for (name, attrs) in [
        ("grpc.server.call.duration", &server_ended[..]),
        ("grpc.client.attempt.duration", &client_ended[..]),
        ("grpc.client.call.duration", &client_ended[..]),
    ] {
        let (count, sum, bounds) = histogram(sdk.point(name, attrs));
        assert_eq!(count, 3, "{name}");
        assert!(sum > 0.0 && sum < 30.0, "{name}: {sum} s in all");
        assert_eq!(bounds, LATENCY, "{name}: A66's latency buckets");
    }
    // Message bytes without the 5-byte prefix: "hello" both ways.
    for (name, attrs) in [
        (
            "grpc.server.call.sent_total_compressed_message_size",
            &server_ended[..],
        ),
        (
            "grpc.server.call.rcvd_total_compressed_message_size",
            &server_ended[..],
        ),
        (
            "grpc.client.attempt.sent_total_compressed_message_size",
            &client_ended[..],
        ),
        (
            "grpc.client.attempt.rcvd_total_compressed_message_size",
            &client_ended[..],
        ),
    ] {
        let (count, sum, bounds) = histogram(sdk.point(name, attrs));
        assert_eq!((count, sum), (3, 3.0 * len_of("hello")), "{name}");
        assert_eq!(bounds, SIZES, "{name}: A66's size buckets");
    }
}

#[tokio::test]
async fn otel_streaming_sizes_add_up_every_message() {
    let (sdk, mut client, target) = registered_pair(EchoService).await;
    // Server streaming: one request, a response per word.
    let words_back = replies(client.server_streaming_echo(request("a bb ccc")).await).await;
    assert_eq!(words_back.len(), 3);
    // Client streaming: three requests, one joined response.
    let words = tokio_stream::iter(["dd", "e", "ffff"].map(request));
    let joined = client.client_streaming_echo(words).await.unwrap();
    assert_eq!(joined.into_inner().message, "dd e ffff");
    // Bidi: two requests, two responses.
    let echoes: Vec<EchoResponse> = replies(
        client
            .bidirectional_streaming_echo(tokio_stream::iter(["x", "yz"].map(request)))
            .await,
    )
    .await;
    assert_eq!(echoes.len(), 2);
    wait_for_ends(&sdk, 3).await;

    let words_len = |words: &[&str]| words.iter().map(|w| len_of(w)).sum::<f64>();
    // (method, bytes the client sent, bytes the server sent)
    let cases = [
        (
            "hotpath.echo.Echo/ServerStreamingEcho",
            len_of("a bb ccc"),
            words_len(&["a", "bb", "ccc"]),
        ),
        (
            "hotpath.echo.Echo/ClientStreamingEcho",
            words_len(&["dd", "e", "ffff"]),
            len_of("dd e ffff"),
        ),
        (
            "hotpath.echo.Echo/BidirectionalStreamingEcho",
            words_len(&["x", "yz"]),
            words_len(&["x", "yz"]),
        ),
    ];
    for (method, up, down) in cases {
        let server = [("grpc.method", method), ("grpc.status", "OK")];
        let client = [
            ("grpc.method", method),
            ("grpc.status", "OK"),
            ("grpc.target", target.as_str()),
        ];
        let sum = |name: &str, attrs: &[(&str, &str)]| {
            let (count, sum, _) = histogram(sdk.point(name, attrs));
            assert_eq!(count, 1, "{name} {method}");
            sum
        };
        assert_eq!(
            sum(
                "grpc.server.call.rcvd_total_compressed_message_size",
                &server
            ),
            up,
            "{method}"
        );
        assert_eq!(
            sum(
                "grpc.server.call.sent_total_compressed_message_size",
                &server
            ),
            down,
            "{method}"
        );
        assert_eq!(
            sum(
                "grpc.client.attempt.sent_total_compressed_message_size",
                &client
            ),
            up,
            "{method}"
        );
        assert_eq!(
            sum(
                "grpc.client.attempt.rcvd_total_compressed_message_size",
                &client
            ),
            down,
            "{method}"
        );
        assert_eq!(
            sdk.point("grpc.server.call.started", &[("grpc.method", method)]),
            Some(Point::Counter(1))
        );
    }
}

/// Answers each unary call by its message: `denied` fails with
/// PERMISSION_DENIED, `sleep` waits 10 s (for deadlines and cancels);
/// server streaming answers UNIMPLEMENTED.
#[derive(Debug, Default)]
struct Scripted;

#[tonic::async_trait]
impl EchoOverride for Scripted {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        match request.into_inner().message.as_str() {
            "denied" => Err(Status::permission_denied("no")),
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Err(Status::internal("slept"))
            }
            message => Ok(Response::new(EchoResponse {
                message: message.to_owned(),
            })),
        }
    }

    /// A registered method the service does not implement.
    async fn server_streaming(
        &self,
        _: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        Err(Status::unimplemented("unary only"))
    }
}

fn ended(method: &'static str, status: &'static str) -> [(&'static str, &'static str); 2] {
    [("grpc.method", method), ("grpc.status", status)]
}

#[tokio::test]
async fn otel_error_status_on_both_sides() {
    let (sdk, mut client, target) = registered_pair(Scripted).await;
    let status = client.unary_echo(request("denied")).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    // A registered method the service does not implement.
    let status = client
        .server_streaming_echo(request("x"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    wait_for_ends(&sdk, 2).await;

    let denied = ended(UNARY, "PERMISSION_DENIED");
    let (count, sum, _) = histogram(sdk.point(
        "grpc.server.call.sent_total_compressed_message_size",
        &denied,
    ));
    assert_eq!((count, sum), (1, 0.0), "an error status sends no message");
    let (count, sum, _) = histogram(sdk.point(
        "grpc.server.call.rcvd_total_compressed_message_size",
        &denied,
    ));
    assert_eq!((count, sum), (1, len_of("denied")));
    let client_denied = [
        ("grpc.method", UNARY),
        ("grpc.status", "PERMISSION_DENIED"),
        ("grpc.target", target.as_str()),
    ];
    for name in ["grpc.client.attempt.duration", "grpc.client.call.duration"] {
        assert_eq!(histogram(sdk.point(name, &client_denied)).0, 1, "{name}");
    }
    let unimplemented = ended("hotpath.echo.Echo/ServerStreamingEcho", "UNIMPLEMENTED");
    assert_eq!(
        histogram(sdk.point("grpc.server.call.duration", &unimplemented)).0,
        1
    );
}

#[tokio::test]
async fn otel_deadline_exceeded_on_both_sides() {
    let (sdk, mut client, target) = registered_pair(Scripted).await;
    let mut call = Request::new(request("sleep"));
    call.set_timeout(Duration::from_millis(100));
    client.unary_echo(call).await.unwrap_err();
    wait_for_ends(&sdk, 1).await;

    let client_attrs = [
        ("grpc.method", UNARY),
        ("grpc.status", "DEADLINE_EXCEEDED"),
        ("grpc.target", target.as_str()),
    ];
    let (count, seconds, _) = histogram(sdk.point("grpc.client.call.duration", &client_attrs));
    assert_eq!(count, 1);
    assert!(
        (0.09..5.0).contains(&seconds),
        "the call lasted until its deadline: {seconds} s"
    );
    // The server sees the deadline pass or the client's reset first.
    let export = sdk.export();
    let server = &export["grpc.server.call.duration"].points;
    let status = server.keys().next().expect("one server point")["grpc.status"].clone();
    assert!(
        status == "DEADLINE_EXCEEDED" || status == "CANCELLED",
        "server status {status}"
    );
}

#[tokio::test]
async fn otel_cancelled_call_on_both_sides() {
    let (sdk, client, target) = registered_pair(Scripted).await;
    // The application gives up on the call: its future is dropped.
    let mut cancelling = client.clone();
    let call = tokio::spawn(async move { cancelling.unary_echo(request("sleep")).await });
    wait_until("the server started the call", || {
        sdk.point("grpc.server.call.started", &[("grpc.method", UNARY)]) == Some(Point::Counter(1))
    })
    .await;
    call.abort();
    wait_for_ends(&sdk, 1).await;
    assert_eq!(
        histogram(sdk.point("grpc.server.call.duration", &ended(UNARY, "CANCELLED"))).0,
        1
    );
    let client_attrs = [
        ("grpc.method", UNARY),
        ("grpc.status", "CANCELLED"),
        ("grpc.target", target.as_str()),
    ];
    assert_eq!(
        histogram(sdk.point("grpc.client.attempt.duration", &client_attrs)).0,
        1
    );
}

#[tokio::test]
async fn otel_unregistered_methods_and_filtered_targets_are_other() {
    let sdk = Sdk::new();
    // No registration on the server: every method is `other`.
    let server = sdk.metrics().build().unwrap();
    let (mut client, _) = pair(
        EchoServer::new(EchoService),
        server,
        // The client registers the unary method alone, and filters its
        // (IP address) target out.
        sdk.metrics()
            .with_method(format!("/{UNARY}"))
            .with_target_filter(|target: &str| !target.contains("127.0.0.1")),
    )
    .await;
    client.unary_echo(request("a")).await.unwrap();
    client
        .client_streaming_echo(tokio_stream::iter([request("b")]))
        .await
        .unwrap();
    wait_for_ends(&sdk, 2).await;
    assert_eq!(
        sdk.point("grpc.server.call.started", &[("grpc.method", "other")]),
        Some(Point::Counter(2))
    );
    assert_eq!(
        sdk.point(
            "grpc.client.attempt.started",
            &[("grpc.method", UNARY), ("grpc.target", "other")]
        ),
        Some(Point::Counter(1))
    );
    assert_eq!(
        sdk.point(
            "grpc.client.attempt.started",
            &[("grpc.method", "other"), ("grpc.target", "other")]
        ),
        Some(Point::Counter(1))
    );
}

#[tokio::test]
async fn otel_method_filter_and_learned_method_cap() {
    let sdk = Sdk::new();
    // The filter accepts the streaming methods; at most two of them keep
    // their names, so the third one seen is `other`.
    let server = sdk
        .metrics()
        .with_method_filter(|path: &str| path.contains("Streaming"))
        .with_max_learned_methods(2)
        .build()
        .unwrap();
    let (mut client, _) = pair(EchoServer::new(EchoService), server, sdk.metrics()).await;
    client.unary_echo(request("a")).await.unwrap();
    replies(client.server_streaming_echo(request("b")).await).await;
    client
        .client_streaming_echo(tokio_stream::iter([request("c")]))
        .await
        .unwrap();
    replies(
        client
            .bidirectional_streaming_echo(tokio_stream::iter([request("d")]))
            .await,
    )
    .await;
    // Seen again: still its own name.
    replies(client.server_streaming_echo(request("e")).await).await;
    wait_for_ends(&sdk, 5).await;
    let started = |method: &str| sdk.point("grpc.server.call.started", &[("grpc.method", method)]);
    assert_eq!(
        started("hotpath.echo.Echo/ServerStreamingEcho"),
        Some(Point::Counter(2))
    );
    assert_eq!(
        started("hotpath.echo.Echo/ClientStreamingEcho"),
        Some(Point::Counter(1))
    );
    // Unary (not accepted) and bidi (past the cap).
    assert_eq!(started("other"), Some(Point::Counter(2)));
    assert_eq!(
        started("hotpath.echo.Echo/BidirectionalStreamingEcho"),
        None
    );
}

#[test]
fn otel_bad_names_are_errors() {
    let provider = opentelemetry::metrics::NoopMeterProvider::new();
    let build = |b: OtelMetricsBuilder| b.build().map(|_| ());
    assert_eq!(
        build(OtelMetrics::builder(&provider).with_method("Hello")),
        Err(OtelMetricsError::InvalidMethod("/Hello".to_owned()))
    );
    assert_eq!(
        build(OtelMetrics::builder(&provider).with_method("/a/b/c")),
        Err(OtelMetricsError::InvalidMethod("/a/b/c".to_owned()))
    );
    assert_eq!(
        build(OtelMetrics::builder(&provider).with_service("a/b")),
        Err(OtelMetricsError::InvalidService("a/b".to_owned()))
    );
    assert_eq!(
        build(OtelMetrics::builder(&provider).with_service("")),
        Err(OtelMetricsError::InvalidService(String::new()))
    );
    // Both spellings of a method path are accepted.
    assert_eq!(
        build(
            OtelMetrics::builder(&provider)
                .with_methods(["pkg.S/M", "/pkg.S/N"])
                .with_service("pkg.T")
        ),
        Ok(())
    );
}

#[tokio::test]
async fn otel_one_handler_shared_by_server_and_client() {
    let sdk = Sdk::new();
    let (addr, incoming) = support::bind().await;
    let target = format!("http://{addr}");
    let metrics = std::sync::Arc::new(
        sdk.metrics()
            .with_service(SERVICE)
            .with_target(target.as_str())
            .build()
            .unwrap(),
    );
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(CombinedLayer::server().with(std::sync::Arc::clone(&metrics)))
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let channel = support::connect(addr).await;
    let mut client = EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(CombinedLayer::client().with(metrics))
            .service(channel),
    );
    client.unary_echo(request("hi")).await.unwrap();
    wait_for_ends(&sdk, 1).await;
    // Each side records its own instruments with its own attributes.
    assert_eq!(
        sdk.point("grpc.server.call.started", &[("grpc.method", UNARY)]),
        Some(Point::Counter(1))
    );
    assert_eq!(
        sdk.point(
            "grpc.client.attempt.started",
            &[("grpc.method", UNARY), ("grpc.target", target.as_str())]
        ),
        Some(Point::Counter(1))
    );
    assert_eq!(
        histogram(sdk.point("grpc.server.call.duration", &ended(UNARY, "OK"))).0,
        1
    );
}

// ---- a server counts every call of a served method under its name ----

#[tokio::test]
async fn otel_streaming_method_proven_by_response_headers_alone() {
    let (sdk, mut client, _) = registered_pair(EchoService).await;
    // Bidi with no request message: the service reads nothing, but
    // answers with response headers before its (empty) stream ends.
    let echoes = replies(
        client
            .bidirectional_streaming_echo(tokio_stream::empty::<EchoRequest>())
            .await,
    )
    .await;
    assert!(echoes.is_empty());
    wait_for_ends(&sdk, 1).await;

    let bidi = "hotpath.echo.Echo/BidirectionalStreamingEcho";
    assert_eq!(
        sdk.counts("grpc.server.call.started"),
        [(attrs_of(&[("grpc.method", bidi)]), 1)]
    );
    let (count, bytes, _) = histogram(sdk.point(
        "grpc.server.call.rcvd_total_compressed_message_size",
        &ended(bidi, "OK"),
    ));
    assert_eq!((count, bytes), (1, 0.0), "no request message was read");
}

#[tokio::test]
async fn otel_every_call_of_a_served_method_is_started_once_under_its_name() {
    let (sdk, client, _) = registered_pair(EchoService).await;
    // The first calls run together, each unproven as it begins.
    let first: Vec<_> = (0..4)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { client.unary_echo(request("hi")).await })
        })
        .collect();
    for call in first {
        call.await.unwrap().unwrap();
    }
    let mut client = client;
    for _ in 0..3 {
        client.unary_echo(request("hi")).await.unwrap();
    }
    wait_for_ends(&sdk, 7).await;

    assert_eq!(
        sdk.counts("grpc.server.call.started"),
        [(attrs_of(&[("grpc.method", UNARY)]), 7)]
    );
    assert_eq!(
        sdk.counts("grpc.server.call.duration"),
        [(
            attrs_of(&[("grpc.method", UNARY), ("grpc.status", "OK")]),
            7
        )]
    );
}
