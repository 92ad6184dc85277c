//! End-to-end: a real tonic client and server over 127.0.0.1, with the
//! `OutgoingMetadataLayer` stacked over the `Channel` under the generated
//! client. The server echoes back every `x-` metadata pair it received.
#![cfg(feature = "grpc")]

use std::net::SocketAddr;

use bytes::Bytes;
use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, ResponseStream};
use tonic::metadata::{KeyAndValueRef, MetadataMap, MetadataValue};
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};
use tonic_hotpath::metadata::{
    MetadataEntry, OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer,
    OutgoingMetadataService,
};
use tower::ServiceBuilder;

type Client = EchoClient<OutgoingMetadataService<Channel>>;

/// Renders the `x-` pairs of `metadata` one per line as `key=value`, in the
/// map's order (keys in first-seen order, each key's values in order);
/// binary values are decoded and printed as hex.
fn render(metadata: &MetadataMap) -> String {
    let mut out = String::new();
    for entry in metadata.iter() {
        let (key, value) = match entry {
            KeyAndValueRef::Ascii(key, value) => (
                key.as_str(),
                value.to_str().unwrap_or("<not ascii>").to_owned(),
            ),
            KeyAndValueRef::Binary(key, value) => (
                key.as_str(),
                match value.to_bytes() {
                    Ok(bytes) => hex(&bytes),
                    Err(_) => "<bad base64>".to_owned(),
                },
            ),
        };
        if key.starts_with("x-") {
            out.push_str(&format!("{key}={value}\n"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Echo service whose every method answers with `render(request metadata)`.
#[derive(Debug, Clone, Copy)]
struct MetadataEcho;

#[tonic::async_trait]
impl EchoOverride for MetadataEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        Ok(Response::new(EchoResponse {
            message: render(request.metadata()),
        }))
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let message = render(request.metadata());
        let reply = Ok(EchoResponse { message });
        Ok(Response::new(Box::pin(tokio_stream::iter([reply]))))
    }

    async fn client_streaming(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        Ok(Response::new(EchoResponse {
            message: render(request.metadata()),
        }))
    }
}

async fn spawn_metadata_echo() -> SocketAddr {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(MetadataEcho))
            .serve_with_incoming(incoming),
    );
    addr
}

async fn client() -> Client {
    let addr = spawn_metadata_echo().await;
    let channel = support::connect(addr).await;
    EchoClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .service(channel),
    )
}

fn request() -> Request<EchoRequest> {
    Request::new(EchoRequest {
        message: String::new(),
    })
}

fn with_chain(metadata: OutgoingMetadata) -> Request<EchoRequest> {
    let mut request = request();
    request.set_outgoing_metadata(metadata);
    request
}

async fn unary(client: &mut Client, request: Request<EchoRequest>) -> String {
    client
        .unary_echo(request)
        .await
        .expect("unary call")
        .into_inner()
        .message
}

/// The server-side rendering of `pairs`: grouped by key in first-seen order.
fn expected(pairs: &[(&str, &str)]) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for (key, _) in pairs {
        if !keys.contains(key) {
            keys.push(key);
        }
    }
    let mut out = String::new();
    for key in keys {
        for (_, value) in pairs.iter().filter(|(k, _)| *k == key) {
            out.push_str(&format!("{key}={value}\n"));
        }
    }
    out
}

#[tokio::test]
async fn server_receives_every_pair_in_append_order() {
    let mut client = client().await;
    let chain = OutgoingMetadata::new()
        .append_static("x-trace", "t1")
        .unwrap()
        .append("X-Route", "alpha")
        .unwrap()
        .append_bin("x-blob-bin", &[0xde, 0xad, 0xbe, 0xef, 0x00])
        .unwrap()
        .append_bytes("x-trace", Bytes::from_static(b"t2"))
        .unwrap()
        .append_entries([
            MetadataEntry::ascii("x-route", "beta").unwrap(),
            MetadataEntry::binary("x-blob-bin", b"").unwrap(),
            MetadataEntry::from_static("x-trace", "t3").unwrap(),
        ])
        .unwrap()
        .append_bin("x-blob-bin", &[1, 2, 3, 4, 5, 6, 7])
        .unwrap();

    let got = unary(&mut client, with_chain(chain)).await;
    assert_eq!(
        got,
        expected(&[
            ("x-trace", "t1"),
            ("x-route", "alpha"),
            ("x-blob-bin", "deadbeef00"),
            ("x-trace", "t2"),
            ("x-route", "beta"),
            ("x-blob-bin", ""),
            ("x-trace", "t3"),
            ("x-blob-bin", "01020304050607"),
        ])
    );
}

#[tokio::test]
async fn base_map_entries_arrive_first_and_reserved_ones_are_dropped() {
    let mut client = client().await;
    let mut base = MetadataMap::new();
    base.insert("x-base", MetadataValue::from_static("b1"));
    base.append("x-base", MetadataValue::from_static("b2"));
    base.insert("x-z", MetadataValue::from_static("z"));
    base.insert("grpc-status", MetadataValue::from_static("13"));
    base.insert("content-type", MetadataValue::from_static("text/plain"));
    let chain = OutgoingMetadata::from_metadata_map(base)
        .unwrap()
        .append("x-base", "b3")
        .unwrap();
    assert_eq!(chain.len(), 4, "reserved headers removed from the base");

    let got = unary(&mut client, with_chain(chain)).await;
    assert_eq!(
        got,
        expected(&[
            ("x-base", "b1"),
            ("x-base", "b2"),
            ("x-z", "z"),
            ("x-base", "b3")
        ])
    );
}

#[tokio::test]
async fn concurrent_forks_each_arrive_with_only_their_own_pairs() {
    let client = client().await;
    let parent = OutgoingMetadata::new()
        .append_static("x-parent", "p")
        .unwrap();
    let left = parent.append("x-side", "left").unwrap();
    let right = parent
        .append("x-side", "right")
        .unwrap()
        .append("x-only-right", "r")
        .unwrap();

    let mut calls = Vec::new();
    for round in 0..8 {
        let (chain, expect) = if round % 2 == 0 {
            (
                left.clone(),
                expected(&[("x-parent", "p"), ("x-side", "left")]),
            )
        } else {
            (
                right.clone(),
                expected(&[
                    ("x-parent", "p"),
                    ("x-side", "right"),
                    ("x-only-right", "r"),
                ]),
            )
        };
        let mut client = client.clone();
        calls.push(tokio::spawn(async move {
            (unary(&mut client, with_chain(chain)).await, expect)
        }));
    }
    for call in calls {
        let (got, expect) = call.await.unwrap();
        assert_eq!(got, expect);
    }
    assert_eq!(parent.len(), 1, "forks never change their parent");
}

#[tokio::test]
async fn task_local_scope_is_sent_and_extension_wins_over_it() {
    let mut client = client().await;
    let scoped = OutgoingMetadata::new().append("x-scope", "outer").unwrap();
    let attached = OutgoingMetadata::new().append("x-attached", "yes").unwrap();

    let (from_scope, from_extension) = scoped
        .scope(async {
            let from_scope = unary(&mut client, request()).await;
            let from_extension = unary(&mut client, with_chain(attached)).await;
            (from_scope, from_extension)
        })
        .await;
    assert_eq!(from_scope, expected(&[("x-scope", "outer")]));
    assert_eq!(from_extension, expected(&[("x-attached", "yes")]));

    // Outside the scope nothing is added.
    assert_eq!(unary(&mut client, request()).await, "");
}

#[tokio::test]
async fn nested_scope_extends_the_outer_chain() {
    let mut client = client().await;
    let outer = OutgoingMetadata::new().append("x-hop", "1").unwrap();
    let got = outer
        .scope(async {
            let inner = OutgoingMetadata::current()
                .unwrap_or_default()
                .append("x-hop", "2")
                .unwrap();
            inner.scope(unary(&mut client, request())).await
        })
        .await;
    assert_eq!(got, expected(&[("x-hop", "1"), ("x-hop", "2")]));
}

#[tokio::test]
async fn request_without_chain_is_untouched_and_direct_metadata_still_arrives() {
    let mut client = client().await;

    let mut plain = request();
    plain
        .metadata_mut()
        .insert("x-direct", MetadataValue::from_static("d"));
    assert_eq!(
        unary(&mut client, plain).await,
        expected(&[("x-direct", "d")])
    );

    let mut both = with_chain(
        OutgoingMetadata::new()
            .append("x-direct", "chained")
            .unwrap(),
    );
    both.metadata_mut()
        .insert("x-direct", MetadataValue::from_static("d"));
    assert_eq!(
        unary(&mut client, both).await,
        expected(&[("x-direct", "d"), ("x-direct", "chained")])
    );
}

#[tokio::test]
async fn streaming_calls_carry_the_chain() {
    let mut client = client().await;
    let chain = OutgoingMetadata::new().append("x-stream", "s").unwrap();

    let mut server_stream = client
        .server_streaming_echo(with_chain(chain.clone()))
        .await
        .expect("server streaming call")
        .into_inner();
    let first = server_stream.message().await.unwrap().unwrap();
    assert_eq!(first.message, expected(&[("x-stream", "s")]));

    let messages = tokio_stream::iter([EchoRequest {
        message: "m".into(),
    }]);
    let mut request = Request::new(messages);
    request.set_outgoing_metadata(chain);
    let reply = client.client_streaming_echo(request).await.unwrap();
    assert_eq!(reply.into_inner().message, expected(&[("x-stream", "s")]));
}

#[tokio::test]
async fn full_chain_at_the_default_limit_arrives_whole() {
    let mut client = client().await;
    let mut chain = OutgoingMetadata::new();
    let mut pairs = Vec::new();
    let mut i = 0;
    loop {
        let key = format!("x-k{i}");
        let value = format!("v{i}");
        match chain.append(&key, &value) {
            Ok(next) => chain = next,
            Err(_) => break,
        }
        pairs.push((key, value));
        i += 1;
    }
    assert!(pairs.len() > 300, "{} entries fit in 16 KiB", pairs.len());
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        unary(&mut client, with_chain(chain)).await,
        expected(&borrowed)
    );
}

#[tokio::test]
async fn headers_that_cannot_take_the_chain_fail_the_call_with_a_clear_status() {
    let mut client = client().await;
    let mut chain = OutgoingMetadata::with_limit(usize::MAX);
    for i in 0..tonic_hotpath::metadata::OutgoingMetadata::MAX_ENTRIES {
        chain = chain.append(&format!("x-c{i}"), "v").unwrap();
    }
    let mut request = with_chain(chain);
    for i in 0..16_000 {
        let key: tonic::metadata::MetadataKey<tonic::metadata::Ascii> =
            format!("x-d{i}").parse().unwrap();
        request
            .metadata_mut()
            .insert(key, MetadataValue::from_static("v"));
    }
    let status = client.unary_echo(request).await.unwrap_err();
    assert!(
        status.message().contains("cannot take the 16384 entries"),
        "status names the cause: {status:?}"
    );
    // The client is still usable afterwards.
    let ok = with_chain(OutgoingMetadata::new().append("x-after", "1").unwrap());
    assert_eq!(unary(&mut client, ok).await, expected(&[("x-after", "1")]));
}
