//! A server and a client, each with a `CombinedLayer` of two handlers (a
//! counter and a logger), printing every RPC and connection event.
//!
//! `cargo run --example stats`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::Uri;
use hyper_util::rt::TokioIo;
use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tokio_stream::StreamExt;
use tonic::transport::Server;
use tonic_hotpath::stats::{
    CombinedLayer, ConnEvent, ConnInfo, RpcEvent, RpcInfo, Side, StatsConnector, StatsHandler,
    StatsIncoming,
};
use tower::ServiceBuilder;

/// Counts RPCs, messages and bytes.
#[derive(Debug, Default)]
struct Counter {
    rpcs: AtomicU64,
    messages: AtomicU64,
    wire_bytes: AtomicU64,
}

impl StatsHandler for Counter {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        match event {
            RpcEvent::Begin { .. } => {
                self.rpcs.fetch_add(1, Ordering::Relaxed);
            }
            RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload) => {
                self.messages.fetch_add(1, Ordering::Relaxed);
                self.wire_bytes
                    .fetch_add(payload.wire_length, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

impl Counter {
    fn report(&self, side: &str) {
        println!(
            "{side}: {} rpcs, {} messages, {} bytes on the wire",
            self.rpcs.load(Ordering::Relaxed),
            self.messages.load(Ordering::Relaxed),
            self.wire_bytes.load(Ordering::Relaxed),
        );
    }
}

/// Logs every event; its per-RPC state is the method name and side.
#[derive(Debug)]
struct Logger;

impl StatsHandler for Logger {
    type RpcState = String;
    type ConnState = ();

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> String {
        let side = match info.side {
            Side::Server => "server",
            Side::Client => "client",
        };
        format!("{side} {}", info.method)
    }

    fn handle_rpc(&self, rpc: &mut String, event: &RpcEvent<'_>) {
        match event {
            RpcEvent::InPayload(p) => println!("  [{rpc}] InPayload {} bytes", p.length),
            RpcEvent::OutPayload(p) => println!("  [{rpc}] OutPayload {} bytes", p.length),
            RpcEvent::End(end) => println!(
                "  [{rpc}] End {:?} {:?} after {:?}",
                end.code,
                end.message,
                end.end_time - end.begin_time
            ),
            RpcEvent::Begin { .. } => println!("  [{rpc}] Begin"),
            RpcEvent::InHeader(_) => println!("  [{rpc}] InHeader"),
            RpcEvent::OutHeader(_) => println!("  [{rpc}] OutHeader"),
            RpcEvent::InTrailer(_) => println!("  [{rpc}] InTrailer"),
            RpcEvent::OutTrailer(_) => println!("  [{rpc}] OutTrailer"),
        }
    }

    fn tag_conn(&self, info: &ConnInfo) {
        println!("  conn {:?} peer {:?}", info.side, info.peer_addr);
    }

    fn handle_conn(&self, _: &(), event: &ConnEvent) {
        match event {
            ConnEvent::Begin { .. } => println!("  ConnBegin"),
            ConnEvent::End { .. } => println!("  ConnEnd"),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server_counter = Arc::new(Counter::default());
    let client_counter = Arc::new(Counter::default());

    // Server: the layer and the incoming stream share one handler.
    let server_layer = CombinedLayer::server()
        .with(Arc::clone(&server_counter))
        .with(Logger);
    let (addr, incoming) = support::bind().await;
    let incoming = StatsIncoming::new(incoming, Arc::clone(server_layer.handler()));
    tokio::spawn(
        Server::builder()
            .layer(server_layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );

    // Client: a connector for connection events, the layer over the Channel.
    let client_layer = CombinedLayer::client()
        .with(Arc::clone(&client_counter))
        .with(Logger);
    let connector = tower::service_fn(|uri: Uri| async move {
        let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let stream = tokio::net::TcpStream::connect(authority).await?;
        // tonic's own connector sets TCP_NODELAY; a custom one must too.
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(TokioIo::new(stream))
    });
    let channel = support::endpoint(addr)
        .connect_with_connector(StatsConnector::new(
            connector,
            Arc::clone(client_layer.handler()),
        ))
        .await?;
    let mut client = EchoClient::new(ServiceBuilder::new().layer(client_layer).service(channel));

    println!("unary:");
    client
        .unary_echo(EchoRequest {
            message: "hello".into(),
        })
        .await?;

    println!("server streaming:");
    let mut words = client
        .server_streaming_echo(EchoRequest {
            message: "one two three".into(),
        })
        .await?
        .into_inner();
    while let Some(word) = words.next().await {
        word?;
    }

    drop(client);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    server_counter.report("server");
    client_counter.report("client");
    Ok(())
}
