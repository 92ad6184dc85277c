//! Reserved headers (grpc-go's `isReservedHeader` set and tonic's): refused
//! when appended, dropped from base maps without reordering the rest, and so
//! never sent, in particular a stale `grpc-timeout` forwarded from an
//! incoming map (issue #12, items 2 and 3).
#![cfg(feature = "grpc")]

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Request, Response, Status};
use tonic_hotpath::metadata::{
    MetadataEntry, MetadataError, OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer,
};
use tower::ServiceBuilder;

/// grpc-go's `isReservedHeader` (internal/transport/http_util.go; `:`
/// pseudo-headers aside, which the key charset refuses), tonic's
/// `GRPC_RESERVED_HEADERS`, and the codec's status-details and
/// accept-encoding headers.
const RESERVED: [&str; 10] = [
    "content-type",
    "user-agent",
    "grpc-message-type",
    "grpc-encoding",
    "grpc-message",
    "grpc-status",
    "grpc-timeout",
    "te",
    "grpc-status-details-bin",
    "grpc-accept-encoding",
];

fn leaked(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn assert_reserved<T: std::fmt::Debug>(result: Result<T, MetadataError>, key: &str) {
    match result {
        Err(MetadataError::ReservedKey { key: refused }) => {
            assert_eq!(refused, key.to_ascii_lowercase())
        }
        other => panic!("{key}: expected ReservedKey, got {other:?}"),
    }
}

#[test]
fn appending_any_reserved_key_is_an_error_and_appends_nothing() {
    let chain = OutgoingMetadata::new()
        .append_static("x-request-id", "1")
        .unwrap();
    for key in RESERVED {
        for key in [key.to_owned(), key.to_ascii_uppercase()] {
            let key = leaked(key);
            if key.to_ascii_lowercase().ends_with("-bin") {
                assert_reserved(chain.append_bin(key, b"v"), key);
                assert_reserved(MetadataEntry::binary(key, b"v"), key);
            } else {
                assert_reserved(chain.append(key, "1S"), key);
                assert_reserved(chain.append_static(key, "1S"), key);
                assert_reserved(chain.append_bytes(key, Bytes::from_static(b"1S")), key);
                assert_reserved(MetadataEntry::ascii(key, "1S"), key);
                assert_reserved(MetadataEntry::from_static(key, "1S"), key);
            }
            assert!(MetadataEntry::try_from_static(key, "1S").is_none(), "{key}");
        }
    }
    assert_eq!(chain.len(), 1);
    assert_eq!(
        chain
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["x-request-id"]
    );
    let message = chain.append("grpc-timeout", "1S").unwrap_err().to_string();
    assert_eq!(
        message,
        "metadata key \"grpc-timeout\" is reserved: the gRPC transport sets this header itself"
    );
}

/// The pairs of `map` in its iteration order, reserved keys left out.
fn unreserved_pairs(map: &MetadataMap) -> Vec<(String, String)> {
    map.as_ref()
        .iter()
        .filter(|(name, _)| !RESERVED.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
        .collect()
}

fn chain_pairs(chain: &OutgoingMetadata) -> Vec<(String, String)> {
    chain
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
        .collect()
}

fn base_key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "x-a",
        "x-b",
        "x-c",
        "x-d",
        "authorization",
        "te",
        "content-type",
        "user-agent",
        "grpc-timeout",
        "grpc-status",
        "grpc-accept-encoding",
    ])
}

proptest! {
    /// Dropping reserved keys keeps every other base entry in the map's
    /// order, on maps small (on the stack) and large (through a `Vec`).
    #[test]
    fn base_entries_keep_their_order_after_reserved_keys_are_dropped(
        pairs in prop::collection::vec((base_key(), "[a-z0-9]{0,4}"), 0..48),
    ) {
        let mut map = MetadataMap::new();
        for (key, value) in &pairs {
            map.append(*key, MetadataValue::try_from(value.as_str()).unwrap());
        }
        let expected = unreserved_pairs(&map);
        let chain = OutgoingMetadata::from_metadata_map(map.clone()).unwrap();
        prop_assert_eq!(chain_pairs(&chain), expected.clone());
        prop_assert_eq!(chain.len(), expected.len());
        let rebased = OutgoingMetadata::new().append_static("x-gone", "1").unwrap().with_base(map).unwrap();
        prop_assert_eq!(chain_pairs(&rebased), expected.clone());
        // What is written (and sent) is in the same order.
        let written = rebased.to_metadata_map();
        prop_assert_eq!(unreserved_pairs(&written), expected);
    }
}

/// Cases the old swap-remove got wrong, and the edges: every key reserved.
#[test]
fn base_order_table() {
    type Pairs = &'static [(&'static str, &'static str)];
    let cases: [(Pairs, Pairs); 4] = [
        (
            &[("x-a", "1"), ("te", "trailers"), ("x-b", "2")],
            &[("x-a", "1"), ("x-b", "2")],
        ),
        // swap-remove of `content-type` used to move `x-c` before `x-b`.
        (
            &[
                ("content-type", "application/grpc"),
                ("x-a", "1"),
                ("x-b", "2"),
                ("x-c", "3"),
            ],
            &[("x-a", "1"), ("x-b", "2"), ("x-c", "3")],
        ),
        (
            &[
                ("x-a", "1"),
                ("grpc-timeout", "1m"),
                ("x-a", "2"),
                ("user-agent", "u"),
                ("x-b", "3"),
            ],
            &[("x-a", "1"), ("x-a", "2"), ("x-b", "3")],
        ),
        (&[("te", "trailers"), ("grpc-timeout", "1S")], &[]),
    ];
    for (input, expected) in cases {
        let mut map = MetadataMap::new();
        for (key, value) in input {
            map.append(*key, MetadataValue::try_from(*value).unwrap());
        }
        let chain = OutgoingMetadata::from_metadata_map(map).unwrap();
        let expected: Vec<_> = expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(chain_pairs(&chain), expected, "{input:?}");
    }
}

/// Answers, after 50 ms, with the `grpc-timeout` and `user-agent` it
/// received and its `x-` keys in order.
struct SlowHeaderEcho;

#[tonic::async_trait]
impl EchoOverride for SlowHeaderEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let headers = request.metadata().as_ref();
        let text = |key: &str| {
            let values: Vec<_> = headers
                .get_all(key)
                .iter()
                .map(|value| value.to_str().unwrap_or("?"))
                .collect();
            values.join(",")
        };
        let x_keys: Vec<_> = headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("x-"))
            .map(|(name, value)| format!("{}={}", name, value.to_str().unwrap_or("?")))
            .collect();
        Ok(Response::new(EchoResponse {
            message: format!(
                "grpc-timeout=[{}] user-agent=[{}] {}",
                text("grpc-timeout"),
                text("user-agent"),
                x_keys.join(" ")
            ),
        }))
    }
}

/// A handler that forwards its incoming metadata as the base of its
/// downstream call (grpc-go: `NewOutgoingContext(ctx, incomingMD)`) must
/// not re-send the upstream's `grpc-timeout`: here a 1 ms deadline, long
/// past, that would cancel the 50 ms downstream call. grpc-go's transport
/// drops it; so does the chain.
#[tokio::test]
async fn a_stale_grpc_timeout_in_a_forwarded_incoming_map_does_not_cancel_the_call() {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(SlowHeaderEcho))
            .serve_with_incoming(incoming),
    );
    let mut client = EchoClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .service(support::connect(addr).await),
    );

    // An incoming map as tonic's server hands it to a handler.
    let mut upstream = MetadataMap::new();
    for (key, value) in [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("user-agent", "grpc-go/1.74.2"),
        ("grpc-accept-encoding", "identity,deflate,gzip"),
        ("x-request-id", "r-1"),
        ("grpc-timeout", "1m"),
        ("x-b", "2"),
        ("x-a", "1"),
    ] {
        upstream.append(key, MetadataValue::from_static(value));
    }
    let chain = OutgoingMetadata::from_metadata_map(upstream)
        .unwrap()
        .append_static("x-hop", "2")
        .unwrap();
    let mut request = Request::new(EchoRequest {
        message: String::new(),
    });
    request.set_outgoing_metadata(chain);
    let answer = client
        .unary_echo(request)
        .await
        .expect("the call is not cancelled by the upstream's deadline")
        .into_inner()
        .message;
    let user_agent = answer
        .split("user-agent=[")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap();
    assert!(user_agent.starts_with("tonic/"), "{answer}");
    assert!(!user_agent.contains("grpc-go"), "{answer}");
    assert!(answer.starts_with("grpc-timeout=[] "), "{answer}");
    assert!(
        answer.ends_with(" x-request-id=r-1 x-b=2 x-a=1 x-hop=2"),
        "{answer}"
    );

    // A deadline of the caller's own still applies.
    let mut request = Request::new(EchoRequest {
        message: String::new(),
    });
    request.set_timeout(Duration::from_secs(30));
    let answer = client
        .unary_echo(request)
        .await
        .unwrap()
        .into_inner()
        .message;
    assert!(!answer.starts_with("grpc-timeout=[] "), "{answer}");
}
