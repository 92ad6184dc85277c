//! gRFC A72 tracing (`otel::OtelTracing`): span statuses for an
//! error, a deadline and a cancelled call, and message events numbered per
//! direction on a streaming call, over real tonic servers and clients.
use support::otel_harness;

use otel_harness::*;

#[tokio::test]
async fn otel_error_status_is_the_grpc_message() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::GrpcTraceBin, traced(None)).await;
    let mut client = client(&provider, Propagation::GrpcTraceBin, addr).await;
    let status = client.unary_echo(req("fail")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    for prefix in ["Sent", "Attempt", "Recv"] {
        assert_eq!(
            span(&spans, &format!("{prefix}.{UNARY}")).status,
            Status::error("bad request"),
            "{prefix}"
        );
    }
}

#[tokio::test]
async fn otel_deadline_and_cancel_end_every_span_with_an_error() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::W3c, traced(None)).await;
    let mut client = client(&provider, Propagation::W3c, addr).await;

    // Deadline: the client's 50 ms timeout passes while the server sleeps.
    let mut request = Request::new(req("sleep"));
    request.set_timeout(Duration::from_millis(50));
    let cx = root(&provider);
    let status = client
        .unary_echo(request)
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::Cancelled,
        "tonic reports its own timeout so: {status:?}"
    );
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let trace = cx.span().span_context().trace_id();
    let in_trace: Vec<&SpanData> = spans
        .iter()
        .filter(|span| span.span_context.trace_id() == trace)
        .collect();
    assert_eq!(in_trace.len(), 3, "{in_trace:#?}");
    for span in &in_trace {
        assert!(is_error(span), "{span:#?}");
    }
    exporter.reset();

    // Cancel: the caller drops the call.
    let cx = root(&provider);
    let call = client.unary_echo(req("sleep")).with_context(cx.clone());
    assert!(
        tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err()
    );
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let trace = cx.span().span_context().trace_id();
    for span in spans
        .iter()
        .filter(|span| span.span_context.trace_id() == trace)
    {
        assert!(is_error(span), "{span:#?}");
    }
    let attempt = span(&spans, &format!("Attempt.{UNARY}"));
    assert_eq!(
        attempt.status,
        Status::error("rpc dropped before its status was known")
    );
}

#[tokio::test]
async fn otel_streaming_messages_are_numbered_per_direction() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::GrpcTraceBin, traced(None)).await;
    let mut client = client(&provider, Propagation::GrpcTraceBin, addr).await;
    let requests = tokio_stream::iter(["a", "bb", "ccc"].map(req));
    let mut replies = client
        .bidirectional_streaming_echo(requests)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(reply) = replies.next().await {
        got.push(reply.unwrap().message);
    }
    assert_eq!(got, ["a", "bb", "ccc"]);
    drop(replies);

    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], BIDI)).await;
    for (name, out_name, in_name) in [
        (
            format!("Attempt.{BIDI}"),
            "Outbound message",
            "Inbound message",
        ),
        (
            format!("Recv.{BIDI}"),
            "Outbound message",
            "Inbound message",
        ),
    ] {
        let events = messages(span(&spans, &name));
        for direction in [out_name, in_name] {
            let numbered: Vec<(i64, i64)> = events
                .iter()
                .filter(|(event, ..)| event == direction)
                .map(|(_, number, size)| (*number, *size))
                .collect();
            // Sizes: a string field of n bytes is n + 2 bytes.
            assert_eq!(numbered, [(0, 3), (1, 4), (2, 5)], "{name} {direction}");
        }
    }
}
