//! A call that takes 3 attempts, as gRFC A66 and A72 record it through a
//! `CombinedLayer::client()` below the `RetryLayer`, exported by a real
//! OpenTelemetry SDK: `grpc.client.attempt.*` per attempt (two
//! `UNAVAILABLE`, one `OK`), `grpc.client.call.duration` once (`OK`), one
//! `Sent.` call span with three `Attempt.` spans under it
//! (`previous-rpc-attempts` 0, 1, 2).

use std::time::Duration;

use opentelemetry::Value;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use support::EchoClient;
use support::otel::Sdk;
use tonic::Code;
use tonic_hotpath::otel::OtelTracing;
use tonic_hotpath::retry::{RetryConfig, RetryLayer, RetryPolicy};
use tonic_hotpath::stats::CombinedLayer;

fn fails_twice(i: u32) -> Code {
    if i < 2 { Code::Unavailable } else { Code::Ok }
}

#[tokio::test]
async fn a_call_of_three_attempts_gives_three_attempts_and_one_call() {
    let (addr, _server) = crate::unary::serve(fails_twice).await;
    let sdk = Sdk::new();
    let metrics = sdk
        .metrics()
        .with_method("/hotpath.echo.Echo/UnaryEcho")
        .build()
        .unwrap();
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let tracing = OtelTracing::new(&provider, TraceContextPropagator::new());
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(5))
        .backoff_multiplier(1.0)
        .retryable_code(Code::Unavailable)
        .build()
        .unwrap();
    let channel = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(RetryConfig::new().default_policy(policy)))
        .layer(CombinedLayer::client().with(metrics).with(tracing))
        .service(support::connect(addr).await);
    EchoClient::new(channel)
        .unary_echo(support::EchoRequest::default())
        .await
        .unwrap();

    // The call is over once its last attempt's handlers let go.
    support::wait_until("the call's duration", || {
        sdk.counts_by("grpc.client.call.duration", "grpc.status")
            .values()
            .sum::<u64>()
            == 1
    })
    .await;
    let by_status = |name| sdk.counts_by(name, "grpc.status");
    assert_eq!(
        by_status("grpc.client.call.duration"),
        [(Some("OK".to_owned()), 1)].into()
    );
    assert_eq!(
        by_status("grpc.client.attempt.duration"),
        [
            (Some("OK".to_owned()), 1),
            (Some("UNAVAILABLE".to_owned()), 2)
        ]
        .into()
    );
    let started: u64 = sdk
        .counts("grpc.client.attempt.started")
        .iter()
        .map(|(_, count)| count)
        .sum();
    assert_eq!(started, 3);

    support::wait_until("four spans", || {
        spans.get_finished_spans().unwrap().len() == 4
    })
    .await;
    let finished = spans.get_finished_spans().unwrap();
    let call = finished
        .iter()
        .find(|span| span.name == "Sent.hotpath.echo.Echo.UnaryEcho")
        .expect("a call span");
    let mut previous: Vec<i64> = finished
        .iter()
        .filter(|span| span.name == "Attempt.hotpath.echo.Echo.UnaryEcho")
        .map(|span| {
            assert_eq!(
                span.parent_span_id,
                call.span_context.span_id(),
                "under the call"
            );
            let attribute = span
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == "previous-rpc-attempts")
                .expect("previous-rpc-attempts");
            match &attribute.value {
                Value::I64(n) => *n,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    previous.sort_unstable();
    assert_eq!(previous, [0, 1, 2]);
}
