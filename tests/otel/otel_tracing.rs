//! gRFC A72 tracing (`otel::OtelTracing`) over real tonic servers
//! and clients on 127.0.0.1, recorded with the SDK's in-memory exporter:
//! span names, kinds, attributes and parent links across processes with
//! both propagators, a server that calls another server continuing the
//! trace, malformed propagation headers, and composition with other
//! handlers and layers. Statuses and message events: `otel_tracing_status`.
use support::otel_harness;

use otel_harness::*;

#[tokio::test]
async fn otel_unary_spans_link_client_attempt_and_server_with_either_propagator() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let service = traced(None);
        let seen = Arc::clone(&service.seen);
        let addr = serve(&provider, propagation, service).await;
        let mut client = client(&provider, propagation, addr).await;

        let cx = root(&provider);
        let reply = client
            .unary_echo(req("hello"))
            .with_context(cx.clone())
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, "hello");
        cx.span().end();

        let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
        let root = span(&spans, "root");
        let sent = span(&spans, &format!("Sent.{UNARY}"));
        let attempt = span(&spans, &format!("Attempt.{UNARY}"));
        let recv = span(&spans, &format!("Recv.{UNARY}"));
        assert_eq!(spans.len(), 4, "{propagation:?}: {spans:#?}");

        assert_eq!(sent.span_kind, SpanKind::Client);
        assert_eq!(attempt.span_kind, SpanKind::Internal);
        assert_eq!(recv.span_kind, SpanKind::Server);
        assert_child(sent, root);
        assert_child(attempt, sent);
        assert_child(recv, attempt);
        assert!(!attempt.parent_span_is_remote);
        assert!(recv.parent_span_is_remote, "{propagation:?}");
        for span in [sent, attempt, recv] {
            assert_eq!(span.status, Status::Ok, "{}", span.name);
            assert_eq!(span.instrumentation_scope.name(), "tonic-hotpath");
            assert_eq!(
                span.instrumentation_scope.version(),
                Some(env!("CARGO_PKG_VERSION"))
            );
        }

        // One message each way; "hello" is 7 bytes as a message.
        assert!(sent.events.is_empty());
        assert_eq!(
            messages(attempt),
            [
                ("Outbound message".to_owned(), 0, 7),
                ("Inbound message".to_owned(), 0, 7)
            ]
        );
        assert_eq!(
            messages(recv),
            [
                ("Inbound message".to_owned(), 0, 7),
                ("Outbound message".to_owned(), 0, 7)
            ]
        );
        assert_eq!(
            attribute(&attempt.attributes, "Client"),
            Some(Value::Bool(true))
        );
        assert_eq!(
            attribute(&recv.attributes, "Client"),
            Some(Value::Bool(false))
        );
        assert_eq!(
            attribute(&attempt.attributes, "previous-rpc-attempts"),
            Some(Value::I64(0))
        );

        // The handler ran with the server span current, and the header
        // was the chosen propagator's.
        let seen = seen.lock().unwrap();
        assert_eq!(seen.contexts.len(), 1);
        assert_eq!(seen.contexts[0].span_id(), recv.span_context.span_id());
        assert!(
            seen.headers[0].iter().any(|h| h == propagation.header()),
            "{propagation:?}: {:?}",
            seen.headers[0]
        );
    }
}

#[tokio::test]
async fn otel_untraced_caller_starts_a_new_trace() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::W3c, traced(None)).await;
    let mut client = client(&provider, Propagation::W3c, addr).await;
    client.unary_echo(req("x")).await.unwrap();
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let sent = span(&spans, &format!("Sent.{UNARY}"));
    assert_eq!(sent.parent_span_id, SpanId::INVALID);
    assert_child(
        span(&spans, &format!("Recv.{UNARY}")),
        span(&spans, &format!("Attempt.{UNARY}")),
    );
}

#[tokio::test]
async fn otel_trace_continues_through_a_server_that_calls_another() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let downstream = traced(None);
        let downstream_seen = Arc::clone(&downstream.seen);
        let downstream_addr = serve(&provider, propagation, downstream).await;
        let downstream_client = client(&provider, propagation, downstream_addr).await;
        let hop: Hop = Arc::new(move |message| {
            let mut client = downstream_client.clone();
            Box::pin(async move {
                let reply = client.unary_echo(req(&message)).await?;
                Ok(reply.into_inner().message)
            })
        });
        let addr = serve(&provider, propagation, traced(Some(hop))).await;
        let mut client = client(&provider, propagation, addr).await;

        let cx = root(&provider);
        let reply = client
            .unary_echo(req("hop"))
            .with_context(cx.clone())
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, "downstream");
        cx.span().end();

        // root, and Sent, Attempt, Recv for each of the two calls.
        support::wait_until("seven spans", || {
            exporter.get_finished_spans().unwrap().len() == 7
        })
        .await;
        let spans_now = exporter.get_finished_spans().unwrap();
        let by_kind = |kind: SpanKind, prefix: &str| -> Vec<&SpanData> {
            spans_now
                .iter()
                .filter(|span| span.span_kind == kind && span.name.starts_with(prefix))
                .collect()
        };
        let root = span(&spans_now, "root");
        let sents = by_kind(SpanKind::Client, "Sent.");
        let attempts = by_kind(SpanKind::Internal, "Attempt.");
        let recvs = by_kind(SpanKind::Server, "Recv.");
        assert_eq!((sents.len(), attempts.len(), recvs.len()), (2, 2, 2));
        // root -> Sent -> Attempt -> Recv (first server) -> Sent -> Attempt -> Recv.
        let child_of = |list: &[&'_ SpanData], parent: &SpanData| -> SpanData {
            (*list
                .iter()
                .find(|span| span.parent_span_id == parent.span_context.span_id())
                .unwrap_or_else(|| panic!("{propagation:?}: no child of {}", parent.name)))
            .clone()
        };
        let sent1 = child_of(&sents, root);
        let attempt1 = child_of(&attempts, &sent1);
        let recv1 = child_of(&recvs, &attempt1);
        let sent2 = child_of(&sents, &recv1);
        let attempt2 = child_of(&attempts, &sent2);
        let recv2 = child_of(&recvs, &attempt2);
        for span in [&sent1, &attempt1, &recv1, &sent2, &attempt2, &recv2] {
            assert_eq!(span.span_context.trace_id(), root.span_context.trace_id());
            assert_eq!(span.status, Status::Ok);
        }
        // The downstream call also carried the metadata scope's entry.
        let seen = downstream_seen.lock().unwrap();
        assert!(
            seen.headers[0].iter().any(|h| h == "x-hop"),
            "{:?}",
            seen.headers
        );
        assert_eq!(seen.contexts[0].span_id(), recv2.span_context.span_id());
    }
}

#[tokio::test]
async fn otel_malformed_propagation_headers_give_a_root_server_span() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let addr = serve(&provider, propagation, traced(None)).await;
        // An untraced client sending garbage in both headers.
        let mut client = EchoClient::new(support::connect(addr).await);
        let mut request = Request::new(req("x"));
        request.metadata_mut().insert_bin(
            "grpc-trace-bin",
            tonic::metadata::MetadataValue::from_bytes(&[0, 0, 1, 2, 3]),
        );
        request
            .metadata_mut()
            .insert("traceparent", "00-zz-not-a-trace-01".parse().unwrap());
        client.unary_echo(request).await.unwrap();
        let spans = wait_for_spans(&exporter, &names(&["Recv"], UNARY)).await;
        let recv = span(&spans, &format!("Recv.{UNARY}"));
        assert_eq!(recv.parent_span_id, SpanId::INVALID, "{propagation:?}");
        assert_eq!(recv.status, Status::Ok);
    }
}

/// `OtelTracing` first or last among a layer's handlers, and the metadata
/// layer below the client stats layer instead of above it.
#[tokio::test]
async fn otel_composes_in_either_order() {
    let (provider, exporter) = provider();
    let layer = CombinedLayer::server()
        .with(Propagation::W3c.handler(&provider))
        .with(Ends::default());
    let service = traced(None);
    let seen = Arc::clone(&service.seen);
    let addr = serve_layer(layer, service).await;
    let layer = CombinedLayer::client().with(Propagation::W3c.handler(&provider));
    let channel = support::connect(addr).await;
    let mut client = EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(layer)
            .layer(OutgoingMetadataLayer::new())
            .service(channel),
    );
    let cx = root(&provider);
    OutgoingMetadata::new()
        .append_static("x-scope", "1")
        .unwrap()
        .scope(client.unary_echo(req("x")).with_context(cx.clone()))
        .await
        .unwrap();
    cx.span().end();
    let mut expected = names(&["Sent", "Attempt", "Recv"], UNARY);
    expected.push("root".to_owned());
    let spans = wait_for_spans(&exporter, &expected).await;
    let attempt = span(&spans, &format!("Attempt.{UNARY}"));
    let recv = span(&spans, &format!("Recv.{UNARY}"));
    assert_child(span(&spans, &format!("Sent.{UNARY}")), span(&spans, "root"));
    assert_child(recv, attempt);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.contexts[0].span_id(), recv.span_context.span_id());
    assert!(seen.headers[0].iter().any(|h| h == "x-scope"));
    assert!(seen.headers[0].iter().any(|h| h == "traceparent"));
}

/// A propagator must be usable on its own too: `OtelTracing` takes any
/// `TextMapPropagator`, and the in-crate one matches what it injects.
#[test]
fn otel_grpc_trace_bin_round_trips_through_a_map() {
    let (provider, _exporter) = provider();
    let cx = root(&provider);
    let mut carrier = std::collections::HashMap::new();
    GrpcTraceBinPropagator::new().inject_context(&cx, &mut carrier);
    let back = GrpcTraceBinPropagator::new().extract(&carrier);
    assert_eq!(
        back.span().span_context().span_id(),
        cx.span().span_context().span_id()
    );
}

/// A server-streaming handler's replies are produced when tonic polls the
/// response stream, after the handler returned: they run in the server
/// span too, so work they do continues the trace.
#[tokio::test]
async fn otel_response_stream_items_run_in_the_server_span() {
    let (provider, exporter) = provider();
    let service = traced(None);
    let seen = Arc::clone(&service.seen);
    let addr = serve(&provider, Propagation::W3c, service).await;
    let mut client = client(&provider, Propagation::W3c, addr).await;

    let cx = root(&provider);
    let mut replies = client
        .server_streaming_echo(req("a bb ccc"))
        .with_context(cx.clone())
        .await
        .unwrap()
        .into_inner();
    let mut words = Vec::new();
    while let Some(reply) = replies.message().await.unwrap() {
        words.push(reply.message);
    }
    assert_eq!(words, ["a", "bb", "ccc"]);
    cx.span().end();

    let method = "hotpath.echo.Echo.ServerStreamingEcho";
    let spans = wait_for_spans(&exporter, &names(&["Recv"], method)).await;
    let recv = span(&spans, &format!("Recv.{method}"));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.contexts.len(), 3, "one context per reply");
    for context in &seen.contexts {
        assert_eq!(context.span_id(), recv.span_context.span_id());
        assert_eq!(context.trace_id(), recv.span_context.trace_id());
    }
}
