//! `MESSAGE_DATA` and `HALF_CLOSE`: a handler that asks sees every
//! message's bytes (uncompressed, whole however the body split them) and
//! the client's half-close, on both sides; handlers that do not ask see
//! neither (the `EventLog` of the other stats tests panics on an event it
//! does not know, and keeps payloads without data).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost::Message as _;
use tonic::codec::CompressionEncoding;
use tonic::transport::Server;

use support::stacks;
use support::stacks::compress::{ENCODINGS, compressing_client, compressing_routes, layered_pair};
use support::{EchoRequest, EchoResponse, EchoService};
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};

/// What a data-asking handler saw, in order: `("in"|"out", bytes)` per
/// message, `("half-close", empty)`, `("end", empty)`.
#[derive(Debug, Default)]
struct DataLog(Mutex<Vec<(&'static str, Bytes)>>);

impl StatsHandler for DataLog {
    type RpcState = ();
    type ConnState = ();
    const MESSAGE_DATA: bool = true;
    const HALF_CLOSE: bool = true;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        let seen = match event {
            RpcEvent::InPayload(p) | RpcEvent::OutPayload(p) => {
                let data = p.data.expect("asked for message data");
                assert_eq!(
                    Some(data.len() as u32),
                    p.length,
                    "data is the whole message"
                );
                let name = match event {
                    RpcEvent::InPayload(_) => "in",
                    _ => "out",
                };
                (name, data.to_bytes())
            }
            RpcEvent::HalfClose { .. } => ("half-close", Bytes::new()),
            RpcEvent::End(_) => ("end", Bytes::new()),
            _ => return,
        };
        self.0.lock().unwrap().push(seen);
    }
}

impl DataLog {
    fn seen(&self) -> Vec<(&'static str, Bytes)> {
        self.0.lock().unwrap().clone()
    }

    async fn wait_for_end(&self) {
        support::wait_until("the RPC's end", || {
            self.0
                .lock()
                .unwrap()
                .iter()
                .any(|(name, _)| *name == "end")
        })
        .await;
    }
}

fn request(message: &str) -> Bytes {
    EchoRequest {
        message: message.to_owned(),
    }
    .encode_to_vec()
    .into()
}

fn response(message: &str) -> Bytes {
    EchoResponse {
        message: message.to_owned(),
    }
    .encode_to_vec()
    .into()
}

/// A server and a client, each with its own `DataLog`, talking in
/// `encoding` (or uncompressed).
async fn logged_pair(
    encoding: Option<CompressionEncoding>,
) -> (
    Arc<DataLog>,
    Arc<DataLog>,
    support::EchoClient<
        tonic_hotpath::stats::CombinedService<
            tonic::transport::Channel,
            Arc<DataLog>,
            tonic_hotpath::stats::ClientSide,
        >,
    >,
) {
    let server_log = Arc::new(DataLog::default());
    let client_log = Arc::new(DataLog::default());
    let layered = layered_pair(Arc::clone(&server_log), Arc::clone(&client_log)).await;
    let client = match encoding {
        Some(encoding) => compressing_client(layered, encoding),
        None => support::EchoClient::new(layered),
    };
    (server_log, client_log, client)
}

/// Small and large (many body chunks) unary messages, uncompressed and in
/// every encoding: each side sees each message's exact bytes, and no
/// half-close on the server of a unary call that tonic never reads past.
#[tokio::test]
async fn unary_messages_arrive_whole_and_uncompressed_on_both_sides() {
    let encodings = std::iter::once(None).chain(ENCODINGS.into_iter().map(Some));
    for encoding in encodings {
        for size in [5, 200 * 1024] {
            let text = "abcdefghij".repeat(size / 10 + 1);
            let (server_log, client_log, mut client) = logged_pair(encoding).await;
            client
                .unary_echo(EchoRequest {
                    message: text.clone(),
                })
                .await
                .unwrap();
            server_log.wait_for_end().await;
            client_log.wait_for_end().await;
            let (req, res) = (request(&text), response(&text));
            let client_seen = client_log.seen();
            assert_eq!(
                client_seen[..2],
                [("out", req.clone()), ("half-close", Bytes::new())],
                "{encoding:?} {size}"
            );
            assert_eq!(
                client_seen[2..],
                [("in", res.clone()), ("end", Bytes::new())]
            );
            let server_seen = server_log.seen();
            let messages: Vec<_> = server_seen
                .iter()
                .filter(|(name, _)| *name == "in" || *name == "out")
                .cloned()
                .collect();
            assert_eq!(messages, [("in", req), ("out", res)], "{encoding:?} {size}");
        }
    }
}

/// A bidirectional stream: both sides see the client's half-close once,
/// after its last request.
#[tokio::test]
async fn the_half_close_follows_the_last_request_on_both_sides() {
    use tokio_stream::StreamExt;
    let (server_log, client_log, mut client) = logged_pair(None).await;
    let requests = ["a", "b"].map(|m| EchoRequest {
        message: m.to_owned(),
    });
    let replies: Vec<_> = client
        .bidirectional_streaming_echo(tokio_stream::iter(requests))
        .await
        .unwrap()
        .into_inner()
        .collect()
        .await;
    assert_eq!(replies.len(), 2);
    server_log.wait_for_end().await;
    client_log.wait_for_end().await;
    for (side, log, sent) in [
        ("client", &client_log, "out"),
        ("server", &server_log, "in"),
    ] {
        let seen = log.seen();
        let half_closes: Vec<usize> = (0..seen.len())
            .filter(|&i| seen[i].0 == "half-close")
            .collect();
        let last_request = (0..seen.len()).rev().find(|&i| seen[i].0 == sent).unwrap();
        assert_eq!(half_closes.len(), 1, "{side}: {seen:?}");
        assert!(half_closes[0] > last_request, "{side}: {seen:?}");
        let requests: Vec<_> = seen.iter().filter(|(name, _)| *name == sent).collect();
        assert_eq!(requests.len(), 2, "{side}");
        assert_eq!(requests[1].1, request("b"));
    }
}

/// Asks for message bytes but declines them for every RPC (as a binary
/// logger does for calls its filter leaves out): records whether each
/// payload had data, and its uncompressed length.
#[derive(Debug, Default)]
struct Declining(Mutex<Vec<(bool, Option<u32>)>>);

impl StatsHandler for Declining {
    type RpcState = ();
    type ConnState = ();
    const MESSAGE_DATA: bool = true;

    fn wants_message_data(&self, _: &()) -> bool {
        false
    }

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::InPayload(p) | RpcEvent::OutPayload(p) = event {
            self.0.lock().unwrap().push((p.data.is_some(), p.length));
        }
    }
}

/// A declined RPC keeps no bytes and, on the server, decompresses
/// nothing; beside a handler that wants them, both see them.
#[tokio::test]
async fn a_handler_can_decline_the_bytes_of_an_rpc() {
    let declining = Arc::new(Declining::default());
    let wanting = Arc::new(DataLog::default());
    for with_wanting in [false, true] {
        declining.0.lock().unwrap().clear();
        let (addr, incoming) = support::bind().await;
        let layer = CombinedLayer::server().with(Arc::clone(&declining));
        let wanting_layer = CombinedLayer::server()
            .with(Arc::clone(&declining))
            .with(Arc::clone(&wanting));
        if with_wanting {
            stacks::serve(
                Server::builder(),
                wanting_layer.clone(),
                compressing_routes(EchoService),
                wanting_layer.incoming(incoming),
            );
        } else {
            stacks::serve(
                Server::builder(),
                layer.clone(),
                compressing_routes(EchoService),
                layer.incoming(incoming),
            );
        }
        let mut client =
            compressing_client(support::connect(addr).await, CompressionEncoding::Gzip);
        client
            .unary_echo(EchoRequest {
                message: "x".repeat(1000),
            })
            .await
            .unwrap();
        support::wait_until("both payloads", || declining.0.lock().unwrap().len() == 2).await;
        let seen = declining.0.lock().unwrap().clone();
        if with_wanting {
            assert_eq!(seen, [(true, Some(1003)), (true, Some(1003))]);
        } else {
            assert_eq!(
                seen,
                [(false, None), (false, None)],
                "no bytes, not decompressed"
            );
        }
    }
}
